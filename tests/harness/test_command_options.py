"""The `command:` adapter's options: spec and config forms, validation with the valid keys named,
paths checked before a run, end exit codes scored as an end, where the final message is, seeded
writable dirs, the call budget every harness gets, and short ids."""

from __future__ import annotations

import json

import pytest

from harnessrl.harness import HarnessConfigError, check_harnesses, check_options, make_harness
from harnessrl.harness.command import CommandAdapter, merge_options, split_command_spec
from harnessrl.rollout.jobs import call_budget
from harnessrl.rollout.plan import harness_tag

PROXY = "http://127.0.0.1:9/r/key"


def _run(adapter, sandbox, **kw):
    return adapter.run(sandbox, instruction="do it", proxy_base=PROXY, api_key="k", model="m",
                       timeout_s=kw.get("timeout_s", 30), max_turns=3)


def test_spec_options_merge_with_config_options():
    options, template = split_command_spec("command[ro=/usr/share, ro=/usr/lib,end_exits=53,name=qwen]:qwen -p {task}")
    assert template == "qwen -p {task}"
    assert options == {"ro": ["/usr/share", "/usr/lib"], "end_exits": ["53"], "name": "qwen"}
    merged = merge_options(options, {"ro": ["/opt"], "shell": "/bin/bash"})
    assert merged["ro"] == ["/opt", "/usr/share", "/usr/lib"] and merged["shell"] == "/bin/bash"
    adapter = make_harness("command[end_exits=53,final=stdout]:echo {task}", ro=["/usr/share"])
    assert isinstance(adapter, CommandAdapter)
    assert adapter.options.end_exits == (53,) and adapter.options.ro == ("/usr/share",)


@pytest.mark.parametrize("spec, options, needle", [
    ("command:ls", {"rox": ["/x"]}, "unknown command harness option 'rox'; valid: ro, rw, end_exits"),
    ("command[rox=/x]:ls", {}, "'rox'"),
    ("command:ls", {"end_exits": ["fifty"]}, "end_exits must be exit codes"),
    ("command:ls", {"end_exits": [124]}, "not 124"),
    ("command:ls", {"final": "json"}, "final must be last_line, stdout or file:PATH"),
    ("command[name=a b]:ls", {}, "name 'a b'"),
    ("command:ls", {"name": "qwen"}, "goes in its spec"),
    ("command[ro=/x:ls", {}, "without ']'"),
    ("codex", {"extra_argz": []}, "valid: extra_args"),
])
def test_bad_options_name_the_fix(spec, options, needle):
    with pytest.raises(HarnessConfigError, match=None) as err:
        check_options(spec, options)
    assert needle in str(err.value)


def test_run_config_rejects_a_misspelled_key():
    from pydantic import ValidationError

    from harnessrl.config import RunConfig

    with pytest.raises(ValidationError) as err:
        RunConfig.model_validate({"harnesses": [{"name": "command:ls {task}", "options": {"rox": ["/opt"]}}]})
    assert "valid: ro, rw, end_exits, final, shell, name" in str(err.value)
    ok = RunConfig.model_validate({"harnesses": [{"name": "command:ls {task}", "options": {"ro": ["/opt"]}}]})
    assert ok.harnesses[0].options == {"ro": ["/opt"]}


def test_missing_binary_and_paths_are_named(tmp_path, fake_sandbox):
    cases = [("command:/opt/nope/qwen -p {task}", "/opt/nope/qwen does not exist"),
             ("command:qwen-not-installed -p {task}", "'qwen-not-installed' is not visible in the sandbox"),
             (f"command[ro={tmp_path}/absent]:ls", f"ro path {tmp_path}/absent does not exist"),
             ("command[rw=../up]:ls", "relative path inside the run's HOME"),
             ("command[shell=/bin/nosuchsh]:ls", "shell /bin/nosuchsh does not exist")]
    for spec, needle in cases:
        with pytest.raises(HarnessConfigError) as err:
            check_harnesses([spec], {})
        assert needle in str(err.value)
        res = _run(make_harness(spec), fake_sandbox)  # the runner's path: a harness_error, nothing launched
        assert res.status == "harness_error" and needle in res.error
    assert not fake_sandbox.calls
    tool = tmp_path / "opt" / "bin" / "mycli"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\necho from-mycli\n")
    tool.chmod(0o755)
    with pytest.raises(HarnessConfigError):
        check_harnesses([f"command:{tool} {{task}}"], {})  # not under a read-only path: invisible in bwrap
    check_harnesses([f"command[ro={tmp_path / 'opt'}]:{tool} {{task}}"], {})
    check_harnesses(["command:mycli {task}"], {"command:mycli {task}": {"ro": [str(tmp_path / "opt")]}})
    adapter = make_harness(f"command[ro={tmp_path / 'opt'}]:{tool} {{task}}")
    assert tmp_path / "opt" in adapter.ro_paths()


def test_end_exits_are_scored_as_an_end(fake_sandbox):
    template = "echo working; echo 'turn limit reached'; exit 53"
    plain = _run(make_harness(f"command:{template}"), fake_sandbox)
    assert plain.status == "harness_error" and plain.exit_code == 53
    ended = _run(make_harness(f"command[end_exits=53]:{template}"), fake_sandbox)
    assert ended.status == "ok" and ended.exit_code == 53 and ended.error == ""
    assert ended.meta["end_reason"] == "exit 53" and ended.final_message == "turn limit reached"
    other = _run(make_harness("command[end_exits=53]:exit 2"), fake_sandbox)
    assert other.status == "harness_error"


def test_a_program_the_sandbox_cannot_find_points_at_ro_not_at_install(fake_sandbox):
    """`/bin/sh: qwen: not found` (exit 127, a program behind `cd` that check() cannot see) names
    the fix for a command harness: `ro` and `harness check`, never `harness install` alone."""
    res = _run(make_harness("command:cd . && qwen-not-on-this-host -p {task}"), fake_sandbox)
    assert (res.status, res.exit_code) == ("harness_error", 127)
    assert "not found" in res.error and "ro (command[ro=DIR]" in res.error and "harness check" in res.error
    assert "for shipped harnesses only" in res.error
    ended = _run(make_harness("command[end_exits=127]:cd . && qwen-not-on-this-host"), fake_sandbox)
    assert ended.status == "ok"  # end_exits come first


def test_start_hints_fit_the_harness():
    from harnessrl.harness import start_hint

    hint = start_hint("command[name=qwen]:/opt/qwen/bin/qwen -p {task}")
    assert "harness install" not in hint and "ro (command[ro=DIR]" in hint and "harness check" in hint
    assert "`harnessrl harness install qwen-code`" in start_hint("qwen-code:small")
    assert "harness install" not in start_hint("nosuch") and "command[<options>]" in start_hint("nosuch")


def test_config_validate_rejects_a_misspelled_option(tmp_path):
    from typer.testing import CliRunner

    from harnessrl.app.main import app

    bad = tmp_path / "rox.yaml"
    bad.write_text("harnesses:\n  - name: 'command:ls {task}'\n    options: {rox: [/opt]}\n")
    res = CliRunner().invoke(app, ["config", "validate", str(bad)])
    assert res.exit_code == 1 and "'rox'" in res.output and "valid: ro, rw" in res.output
    good = tmp_path / "ro.yaml"
    good.write_text("harnesses:\n  - name: 'command:ls {task}'\n    options: {ro: [/opt]}\n")
    assert CliRunner().invoke(app, ["config", "validate", str(good)]).exit_code == 0


def test_final_message_sources(fake_sandbox):
    out = _run(make_harness("command[final=stdout]:printf 'a\\nb\\n'"), fake_sandbox)
    assert out.final_message == "a\nb"
    filed = _run(make_harness("command[final=file:answer.txt]:echo noise; echo the-answer > answer.txt"), fake_sandbox)
    assert filed.status == "ok" and filed.final_message == "the-answer"


def test_rw_dirs_are_created_and_seeded_without_touching_the_host(tmp_path, fake_sandbox):
    seed = tmp_path / "qwen-config"
    seed.mkdir()
    (seed / "settings.json").write_text('{"a": 1}')
    template = 'cat "$HOME/.qwen/settings.json"; echo changed > "$HOME/.qwen/settings.json"; touch "$HOME/.cache/x/ok"; echo'
    res = _run(make_harness(f"command[rw={seed}:.qwen,rw=.cache/x,final=stdout]:{template}"), fake_sandbox)
    assert res.status == "ok", res.error
    assert res.final_message == '{"a": 1}'
    assert (seed / "settings.json").read_text() == '{"a": 1}'  # the host copy is untouched
    assert seed in make_harness(f"command[rw={seed}:.qwen]:ls").ro_paths()


def test_every_harness_gets_a_call_budget():
    assert make_harness("command:ls").enforces_max_turns is False
    assert call_budget(make_harness("command:ls"), 3) == 3
    assert call_budget(make_harness("codex"), 3) == 3
    assert call_budget(make_harness("claude-code"), 3) == 6  # its own --max-turns first; the budget backs it


def test_short_names_in_ids():
    assert harness_tag("command[name=qwen,end_exits=53]:qwen --yolo -p {task}") == "qwen"
    tag = harness_tag("command[ro=/opt/qwen]:/opt/qwen/bin/qwen -p {task}")
    assert tag.startswith("cmd-qwen-") and "/" not in tag and "{" not in tag
    assert tag != harness_tag("command:/opt/qwen/bin/qwen -p {task}")  # the options are part of the hash


CLIENT = ("command[name=probe]:python -c \"import json,os,urllib.request as u; "
          "r=u.Request(os.environ['OPENAI_BASE_URL']+'/chat/completions', data=json.dumps({'model':'m',"
          "'messages':[{'role':'user','content':'hi'}],'tools':[{'type':'function','function':{'name':'bash',"
          "'parameters':{'type':'object','properties':{'command':{'type':'string'}},'required':['command']}}}]})"
          ".encode(), headers={'content-type':'application/json'}); "
          "print(json.load(u.urlopen(r))['choices'][0]['message']['content'])\"")


def test_harness_check_shows_what_the_harness_sent(tmp_path):
    from typer.testing import CliRunner

    from harnessrl.app.main import app

    res = CliRunner().invoke(app, ["harness", "check", CLIENT, "--sandbox", "local", "--json",
                                   "--run-dir", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout.strip().splitlines()[-1])
    assert report["status"] == "ok" and report["exit_code"] == 0 and report["rollout_id"].startswith("check-")
    [call] = report["calls"]
    assert call["protocol"] == "openai.chat" and call["tools"] == ["bash"] and call["shell_tool"] == "bash"
    assert call["prompt_tokens"] > 20 and call["status"] == "ok"
    assert report["final_message"] == "Hello from the scripted engine."
    missing = CliRunner().invoke(app, ["harness", "check", "command:/opt/nope/agent {task}", "--sandbox", "local"])
    assert missing.exit_code == 2 and "/opt/nope/agent does not exist" in missing.output


def test_shell_tool_option_names_the_cli_shell_tool():
    from harnessrl.harness.command import parse_options, shell_tool_overrides
    from harnessrl.render.bash_format import ShellOverride

    want = ShellOverride("run_commands", "commands", "list")
    assert parse_options({"shell_tool": "run_commands:commands:list"}).shell_tool == want
    assert parse_options({"shell_tool": {"name": "run_commands", "arg": "commands", "kind": "list"}}).shell_tool == want
    assert parse_options({}).shell_tool is None
    with pytest.raises(HarnessConfigError, match="NAME:ARG:KIND"):
        parse_options({"shell_tool": "run_commands:commands:strings"})
    specs = ["command[shell_tool=run_commands:commands:list]:cline {task}", "claude-code", "command:aider {task}",
             "command[name=x]:other {task}"]
    assert shell_tool_overrides(specs, {"command[name=x]:other {task}": {"shell_tool": "exec:cmd:string"}}) == (
        want, ShellOverride("exec", "cmd", "string"))


OPAQUE_CLIENT = CLIENT.replace("'name':'bash'", "'name':'do_it'").replace(
    "'properties':{'command':{'type':'string'}},'required':['command']",
    "'properties':{'steps':{'type':'array','items':{'type':'string'}}},'required':['steps']")


def test_harness_check_names_the_override_when_no_shell_tool_is_found(tmp_path):
    from typer.testing import CliRunner

    from harnessrl.app.main import app

    assert OPAQUE_CLIENT != CLIENT
    res = CliRunner().invoke(app, ["harness", "check", OPAQUE_CLIENT, "--sandbox", "local",
                                   "--run-dir", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    assert "shell tool none found" in res.output and "shell_tool=do_it:steps:argv" in res.output
    spec = OPAQUE_CLIENT.replace("command[name=probe]", "command[name=probe,shell_tool=do_it:steps:list]")
    res = CliRunner().invoke(app, ["harness", "check", spec, "--sandbox", "local", "--json",
                                   "--run-dir", str(tmp_path / "b")])
    assert res.exit_code == 0, res.output
    [call] = json.loads(res.stdout.strip().splitlines()[-1])["calls"]
    assert (call["shell_tool"], call["shell_kind"], call["suggestions"]) == ("do_it", "list", [])
