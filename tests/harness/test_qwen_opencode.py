"""The qwen-code and opencode adapters: what they launch (flags and config only), their profiles,
how their ends are read, and their place in the installer and the call budget."""

from __future__ import annotations

import json

import pytest

from harnessrl.harness import HarnessConfigError, harness_profiles, make_harness
from harnessrl.harness import install as inst
from harnessrl.harness.base import LaunchOutcome, RunDirs, RunRequest
from harnessrl.rollout.jobs import call_budget

PROXY = "http://127.0.0.1:9/r/key"


def _req() -> RunRequest:
    return RunRequest("Write 'hi' into a.txt", PROXY, "secretkey", "policy", 120.0, 5, "/workspace", RunDirs("abc123"))


def _outcome(stdout: str, code: int, status: str) -> LaunchOutcome:
    return LaunchOutcome(status, code, stdout, "", 1.0, {})  # type: ignore[arg-type]


def test_qwen_code_flags_profiles_and_turn_limit_exit(tmp_path):
    full = make_harness("qwen-code", cache=tmp_path).build(_req())
    argv = full.argv
    assert argv[0] == str(tmp_path / "harnesses" / "qwen-code" / "node_modules" / ".bin" / "qwen")
    assert argv[argv.index("--openai-base-url") + 1] == PROXY + "/v1" and argv[argv.index("-m") + 1] == "policy"
    assert argv[argv.index("--max-session-turns") + 1] == "5" and argv[-1] == "Write 'hi' into a.txt"
    assert "--bare" not in argv and full.env["HOME"].startswith("@RUN@/")
    small = make_harness("qwen-code:small", cache=tmp_path).build(_req()).argv
    assert "--bare" in small and "--exclude-tools=read_file" in small
    assert not {"--exclude-tools=run_shell_command", "--exclude-tools=edit"} & set(small)
    assert "--system-prompt" in small
    adapter = make_harness("qwen-code:small")
    ended = adapter.parse(_req(), _outcome("made a.txt\n", 53, "harness_error"))
    assert ended.status == "ok" and ended.meta["end_reason"] == "max_turns" and ended.final_message == "made a.txt"
    assert adapter.parse(_req(), _outcome("", 1, "harness_error")).status == "harness_error"
    assert harness_profiles("qwen-code") == ["full", "small"]


def test_opencode_provider_config_profiles_and_budget(tmp_path):
    launch = make_harness("opencode", cache=tmp_path).build(_req())
    assert launch.argv[1:4] == ["run", "-m", "harnessrl/policy"] and launch.argv[-1] == "Write 'hi' into a.txt"
    config = json.loads(launch.env["OPENCODE_CONFIG_CONTENT"])
    provider = config["provider"]["harnessrl"]
    assert provider["options"] == {"baseURL": PROXY + "/v1", "apiKey": "secretkey"}
    assert config["model"] == config["small_model"] == "harnessrl/policy" and "tools" not in config
    assert launch.env["PWD"] == "/workspace"
    small = json.loads(make_harness("opencode:small").build(_req()).env["OPENCODE_CONFIG_CONTENT"])
    assert small["tools"] and "bash" not in small["tools"] and not any(small["tools"].values())
    assert "bash tool" in small["agent"]["build"]["prompt"]
    assert call_budget(make_harness("opencode"), 5) == 5  # no turn limit of its own
    assert call_budget(make_harness("qwen-code"), 5) == 10  # --max-session-turns first, the budget backs it
    with pytest.raises(HarnessConfigError):
        make_harness("opencode:tiny")


def test_installer_pins_both(tmp_path):
    assert inst.package("qwen-code").spec == "@qwen-code/qwen-code@0.24.4"
    assert inst.package("opencode").spec == "opencode-ai@1.18.33"
    info = inst.installed_info("opencode", tmp_path)
    assert not info.installed and info.note == "not installed"
    res = make_harness("opencode", cache=tmp_path).preflight()
    assert res is not None and "harnessrl harness install opencode" in res
