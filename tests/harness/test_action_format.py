"""One vocabulary for the action format (harness/action_format.py): the builtin agent's --format
and mini-swe-agent's `format` option (older: `mode`) and profiles take the same names, and the
older spellings `tool` and `text` still mean `tools` and `bash` (`text`: with a FutureWarning, as
`bash` is the word render.tool_format uses for one ```bash block per reply)."""

from __future__ import annotations

import pytest

from harnessrl.harness import HarnessConfigError, make_harness
from harnessrl.harness import builtin_agent as agent
from harnessrl.harness.action_format import ACTION_FORMATS, ALIASES, action_format
from harnessrl.harness.base import RunDirs, RunRequest
from harnessrl.harness.mini_swe_agent import PROFILES, MiniSweAgentAdapter


def test_the_names_are_bash_and_tools_and_the_older_ones_are_aliases():
    assert ACTION_FORMATS == ("bash", "tools") and ALIASES == {"tool": "tools", "text": "bash"}
    assert [action_format(v, "h") for v in ("bash", "tools", "tool")] == ["bash", "tools", "tools"]
    with pytest.warns(FutureWarning, match="action format 'text' is now 'bash'"):
        assert action_format("text", "h") == "bash"
    with pytest.raises(HarnessConfigError, match="h action format must be one of bash, tools, got 'sh'"):
        action_format("sh", "h")


def test_the_builtin_agent_keeps_the_same_names(monkeypatch):
    """The standalone script's own copy agrees, and `--format tool` runs the tools format."""
    assert agent.ACTION_FORMATS == ACTION_FORMATS and agent.FORMAT_ALIASES == ALIASES
    seen = []
    monkeypatch.setattr(agent, "run", lambda args, task: seen.append(args.format) or {})
    for given in ("bash", "tools", "tool", "text"):
        assert agent.main(["--base-url", "http://127.0.0.1:9/v1", "--task", "t", "--format", given]) == 0
    assert seen == ["bash", "tools", "tools", "bash"]
    with pytest.raises(SystemExit):
        agent.main(["--base-url", "http://127.0.0.1:9/v1", "--task", "t", "--format", "sh"])


def test_mini_swe_agent_takes_the_same_names():
    assert {p.settings["format"] for p in PROFILES.values()} == set(ACTION_FORMATS)
    built = {}
    for options in ({"format": "tools"}, {"format": "tool"}, {"mode": "tool"}, {"mode": "tools"}):
        adapter = make_harness("mini-swe-agent", **options)
        assert (adapter.format, adapter.profile.name) == ("tools", "tool"), options
        built[str(options)] = adapter.build(_req()).argv
    assert len({str(v) for v in built.values()}) == 1  # the same launch whichever spelling
    assert "--model-class" not in next(iter(built.values()))
    text = MiniSweAgentAdapter(format="bash")
    assert text.format == "bash" and "--model-class" in text.build(_req()).argv
    with pytest.warns(FutureWarning):
        assert MiniSweAgentAdapter(format="text").profile.name == "bash"
    assert make_harness("mini-swe-agent:tools").profile.name == "tool"  # the profile takes the new name too
    with pytest.raises(HarnessConfigError, match="not both"):
        MiniSweAgentAdapter(format="tools", mode="tool")
    with pytest.raises(HarnessConfigError, match="must be one of bash, tools"):
        MiniSweAgentAdapter(format="fast")


def _req() -> RunRequest:
    return RunRequest(instruction="Write 'hi' into a.txt", proxy_base="http://127.0.0.1:9/r/k", api_key="k",
                      model="policy", timeout_s=120.0, max_turns=7, workdir="/workspace", dirs=RunDirs("abc123"))
