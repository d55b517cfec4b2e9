"""Run one host command to completion with a timeout, output in files, and tree kill.

Shared by the backends: stdin and the captured stdout/stderr go through temporary files (no
pipe deadlocks, no unbounded memory); the caller decides how a process tree is killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from harnessrl.sandbox.base import ProcessResult, SandboxConfig


def base_env(cfg: SandboxConfig, *, home: str, tmp: str, path: str) -> dict[str, str]:
    env = {
        "PATH": path,
        "HOME": home,
        "TMPDIR": tmp,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }
    env.update({k: os.environ[k] for k in cfg.env_passthrough if k in os.environ})
    env.update(cfg.env)
    return env


def kill_process_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group led by ``proc`` (started with start_new_session=True)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def read_tail(f: BinaryIO, max_bytes: int) -> str:
    f.seek(0, os.SEEK_END)
    size = f.tell()
    f.seek(max(0, size - max_bytes))
    return f.read().decode("utf-8", errors="replace")


def run_to_completion(
    cmd: list[str],
    *,
    env: dict[str, str],
    cwd: str | None,
    timeout_s: float,
    stdin: bytes | str | BinaryIO | None = None,
    stdout_path: Path | None = None,
    max_output_bytes: int = 8 << 20,
    tmp_dir: str | None = None,
    kill_tree: Callable[[subprocess.Popen], None] = kill_process_group,
    on_start: Callable[[subprocess.Popen], None] | None = None,
    pass_fds: tuple[int, ...] = (),
) -> ProcessResult:
    """Start ``cmd`` in a new session, wait up to ``timeout_s``, kill its tree on timeout."""
    with contextlib.ExitStack() as stack:
        in_f: BinaryIO | int = subprocess.DEVNULL
        if isinstance(stdin, (str, bytes)):
            staged = stack.enter_context(tempfile.TemporaryFile(dir=tmp_dir))
            staged.write(stdin.encode() if isinstance(stdin, str) else stdin)
            staged.seek(0)
            in_f = staged
        elif stdin is not None:
            in_f = stdin
        out_f: BinaryIO
        if stdout_path is not None:
            out_f = stack.enter_context(open(stdout_path, "wb"))
        else:
            out_f = stack.enter_context(tempfile.TemporaryFile(dir=tmp_dir))
        err_f = stack.enter_context(tempfile.TemporaryFile(dir=tmp_dir))
        timed_out = False
        t0 = time.monotonic()
        proc = subprocess.Popen(
            cmd,
            env=env,
            cwd=cwd,
            stdin=in_f,
            stdout=out_f,
            stderr=err_f,
            start_new_session=True,
            pass_fds=pass_fds,
        )
        if on_start is not None:
            on_start(proc)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_tree(proc)
            rc = proc.wait()
        duration = time.monotonic() - t0
        stdout = "" if stdout_path is not None else read_tail(out_f, max_output_bytes)
        stderr = read_tail(err_f, max_output_bytes)
    return ProcessResult(rc, stdout, stderr, timed_out, duration)
