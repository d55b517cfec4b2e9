"""The real installer against the npm registry (idempotent: a no-op when the pinned version is in the
cache): each installed binary runs and reports its pinned version."""

from __future__ import annotations

import subprocess

import pytest

from harnessrl.harness import install

pytestmark = [pytest.mark.harness, pytest.mark.timeout(1500)]


@pytest.mark.parametrize("name", ["claude-code", "codex", "openclaw"])
def test_installed_binary_reports_pinned_version(name, kit, tmp_path):
    kit.require_installed(name)
    info = install.installed_info(name)
    assert info.installed and info.version == install.package(name).version
    again = install.install(name)  # idempotent: nothing to do
    assert again.installed and again.seconds == 0
    env = install.npm_env(node24=install.package(name).needs_node24) | {"HOME": str(tmp_path)}
    out = subprocess.run([str(install.bin_path(name)), "--version"], env=env, capture_output=True, text=True,
                         timeout=120, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr[-1000:]
    assert install.package(name).version in out.stdout


def test_mini_swe_agent_in_venv():
    info = install.installed_info("mini-swe-agent")
    assert info.installed and info.version
    assert install.bin_path("mini-swe-agent").exists()
