"""docs/harnesses.md's kilocode example holds what it says: a valid kilo.json with the proxy as its
only provider and every tool but bash off, and a `command:` spec that parses into a CommandAdapter
with the config dir seeded and the name kilocode (the binary itself is not needed)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from harnessrl.harness import make_harness
from harnessrl.harness.command import CommandAdapter

DOC = Path(__file__).resolve().parents[2] / "docs" / "harnesses.md"
FULL_TOOLS = {"background_process", "bash", "board_post", "board_read", "cancel_wakeup", "edit", "glob", "grep",
              "kilo_local_recall", "read", "schedule_wakeup", "skill", "task", "todowrite", "webfetch", "write"}


def _section() -> str:
    text = DOC.read_text()
    start = text.index("### Worked example: kilocode")
    return text[start:text.index("\n### ", start + 1)]


def test_the_kilo_config_serves_through_the_proxy_with_bash_only():
    config = json.loads(re.search(r"<<'JSON'\n(.*?)\nJSON\n", _section(), re.S).group(1))
    provider = config["provider"]["harnessrl"]
    assert provider["options"] == {"baseURL": "{env:OPENAI_BASE_URL}", "apiKey": "{env:OPENAI_API_KEY}"}
    assert config["model"] == config["small_model"] == "harnessrl/policy"
    assert {name for name, on in config["tools"].items() if not on} == FULL_TOOLS - {"bash"}
    assert "bash tool" in config["agent"]["build"]["prompt"]


def test_the_kilo_spec_parses_as_a_command_harness(tmp_path):
    spec = re.search(r'^SPEC="(.*)"$', _section(), re.M).group(1)
    spec = spec.replace("$K", "/opt/kilo").replace("$PWD", str(tmp_path))
    adapter = make_harness(spec)
    assert isinstance(adapter, CommandAdapter)
    assert adapter.ro == (Path("/opt/kilo"),) and adapter.options.name == "kilocode"
    assert adapter.options.rw == (f"{tmp_path / 'kilo-config'}:.config/kilo",)
    assert adapter.template.endswith("/opt/kilo/node_modules/.bin/kilo run --auto -m harnessrl/policy {task}")
