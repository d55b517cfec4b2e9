"""Fakes for the harness tests: a sandbox that runs processes locally (no isolation)."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class FakeResult:
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float


class LocalFakeSandbox:
    """Runs argv as a local subprocess with a private HOME; kills only the direct child on timeout
    (so the tests show that the launcher, not the sandbox, kills the whole tree)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.inner_workspace = str(root / "workspace")
        self.home = root / "home"
        for d in (self.inner_workspace, self.home, root / "tmp"):
            Path(d).mkdir(parents=True, exist_ok=True)
        self.calls: list[dict] = []

    def run(self, argv, *, env=None, cwd=None, timeout_s=None):
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home),
                "TMPDIR": str(self.root / "tmp")}
        self.calls.append({"argv": argv, "env": env, "cwd": cwd, "timeout_s": timeout_s})
        t0 = time.monotonic()
        try:
            p = subprocess.run(argv, env=base | (env or {}), cwd=cwd or self.inner_workspace,
                               capture_output=True, text=True, timeout=timeout_s)
            return FakeResult(p.returncode, p.stdout, p.stderr, False, time.monotonic() - t0)
        except subprocess.TimeoutExpired as e:
            return FakeResult(None, e.stdout or "", e.stderr or "", True, time.monotonic() - t0)


@pytest.fixture
def fake_sandbox(tmp_path: Path) -> LocalFakeSandbox:
    return LocalFakeSandbox(tmp_path)
