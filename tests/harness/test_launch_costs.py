"""Harness launches that skip a wrapper process: the same binary, argv and env the wrapper would use."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import pytest

from harnessrl.harness.codex import NATIVE_TARGETS, native_launch

pytestmark = pytest.mark.skipif(platform.machine() not in NATIVE_TARGETS, reason="no codex platform package here")

def npm_layout(root: Path, with_binary: bool = True) -> Path:
    """node_modules/.bin/codex -> ../@openai/codex/bin/codex.js and the platform package's binary."""
    modules = root / "node_modules"
    shim = modules / "@openai" / "codex" / "bin" / "codex.js"
    shim.parent.mkdir(parents=True)
    shim.write_text("#!/usr/bin/env node\n")
    (modules / ".bin").mkdir()
    (modules / ".bin" / "codex").symlink_to("../@openai/codex/bin/codex.js")
    pkg, triple = NATIVE_TARGETS[platform.machine()]
    exe = modules / pkg / "vendor" / triple / "bin" / "codex"
    if with_binary:
        exe.parent.mkdir(parents=True)
        exe.write_text("")
        exe.chmod(0o755)
    return modules / ".bin" / "codex"



def test_codex_starts_the_binary_its_npm_shim_would_run_with_the_shims_env(tmp_path):
    shim = npm_layout(tmp_path)
    exe, env = native_launch(shim)
    root = tmp_path / "node_modules" / "@openai" / "codex"
    assert Path(exe).is_file() and os.access(exe, os.X_OK) and "vendor" in Path(exe).parts
    assert env == {"CODEX_MANAGED_PACKAGE_ROOT": str(root.resolve()), "CODEX_MANAGED_BY_NPM": "1"}


def test_codex_without_its_platform_binary_or_shim_keeps_the_shim(tmp_path):
    assert native_launch(npm_layout(tmp_path, with_binary=False)) is None
    assert native_launch(tmp_path / "missing" / "codex") is None
    assert native_launch(None) is None


def test_codex_build_uses_the_native_binary_when_installed(tmp_path):
    from harnessrl.harness import make_harness
    from harnessrl.harness.base import RunDirs, RunRequest

    npm_layout(tmp_path / "harnesses" / "codex")
    adapter = make_harness("codex:small", cache=tmp_path)
    req = RunRequest(instruction="t", proxy_base="http://127.0.0.1:1/r/k", api_key="k", model="m",
                     timeout_s=30, max_turns=3, workdir="/workspace", dirs=RunDirs("r"))
    spec = adapter.build(req)
    assert spec.argv[0].endswith("/bin/codex") and "vendor" in spec.argv[0] and spec.argv[1] == "exec"
    assert spec.env["CODEX_MANAGED_BY_NPM"] == "1" and spec.env["CODEX_HOME"]
