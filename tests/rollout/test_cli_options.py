"""`harnessrl rollout` / `eval` refuse a bad option before loading anything (a message, not a traceback)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from harnessrl.app.main import app


@pytest.mark.parametrize("command", ["rollout", "eval"])
def test_bad_tool_format_is_refused(command, tmp_path):
    r = CliRunner().invoke(app, [command, "--tool-format", "zsh", "--run-dir", str(tmp_path / "run")])
    assert r.exit_code == 2 and "--tool-format" in r.output and "bash" in r.output
    assert not (tmp_path / "run").exists()  # refused before a run store was opened
