"""Run one host command to completion with a timeout, bounded output capture, and tree kill.

Shared by the backends: stdin goes through a temporary file; stdout and stderr go through pipes,
each drained by a thread of its own (no pipe deadlocks) that keeps the first ``head_bytes(max)``
(64 KiB) and the last ``max_output_bytes`` and drops the middle, noting how much in the text (a harness
that prints 3 GB costs the host 8 MiB per stream, not a 1 GiB file in /tmp). ``stdout_path``
(a tar stream, say) still goes to a file. The caller decides how a process tree is killed.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import tempfile
import threading
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


DRAIN_WAIT_S = 2.0  # after the command exits, the most its output may take to be read (a writer that never pauses)
DROPPED_NOTE = "\n[harnessrl sandbox: {n} bytes of output dropped here]\n"


def read_tail(f: BinaryIO, max_bytes: int) -> str:
    f.seek(0, os.SEEK_END)
    size = f.tell()
    f.seek(max(0, size - max_bytes))
    return f.read().decode("utf-8", errors="replace")


def head_bytes(max_output_bytes: int) -> int:
    """How much of the start of a stream is kept beside its last ``max_output_bytes``: 64 KiB, none
    under a 1 MiB cap (then only the tail, as a small cap asks)."""
    return min(64 << 10, max_output_bytes // 8) if max_output_bytes >= 1 << 20 else 0


class BoundedCapture:
    """Drains a pipe's read end in a daemon thread, keeping its first ``head`` and last ``tail``
    bytes; memory stays under head + 2 x tail whatever the writer sends. The thread drains until
    every writer is gone (a kept-background daemon never meets a closed pipe)."""

    def __init__(self, fd: int, head: int, tail: int) -> None:
        self._fd, self._head_max, self._tail_max = fd, head, tail
        self._head, self._tail = bytearray(), bytearray()
        self.total = 0
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        self._caught_up = threading.Event()  # set once what was written before result() is read
        self._thread = threading.Thread(target=self._drain, name="sandbox-output", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        asked = False  # result() was called: tell it once the pipe is empty
        try:
            while True:
                if not asked:
                    if self._wake_r in select.select([self._fd, self._wake_r], [], [])[0]:
                        asked = True
                        continue
                elif not select.select([self._fd], [], [], 0)[0]:
                    self._caught_up.set()
                    select.select([self._fd], [], [])
                chunk = os.read(self._fd, 1 << 16)
                if not chunk:
                    return
                with self._lock:
                    self._add(chunk)
        except OSError:
            return
        finally:
            self._caught_up.set()
            for fd in (self._fd, self._wake_r):
                os.close(fd)

    def _add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self._head_max - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        self._tail += chunk
        if len(self._tail) > 2 * self._tail_max:
            del self._tail[: len(self._tail) - self._tail_max]

    def result(self, wait_s: float) -> tuple[str, int]:
        """(the kept text, bytes dropped) once the pipe is read up to now (or ``wait_s`` passed: a
        writer that never pauses); the thread drains on until the last writer is gone."""
        try:
            os.write(self._wake_w, b"x")
        except OSError:  # the thread is done already (every writer gone): it closed its end
            pass
        os.close(self._wake_w)
        self._caught_up.wait(wait_s)
        with self._lock:
            tail = bytes(self._tail[-self._tail_max :]) if self._tail_max else b""
            head = bytes(self._head)
            dropped = self.total - len(head) - len(tail)
        text = head.decode("utf-8", errors="replace")
        if dropped and head:  # a middle went missing: say where (output_dropped counts it in any case)
            text += DROPPED_NOTE.format(n=dropped)
        return text + tail.decode("utf-8", errors="replace"), dropped


def _capture(max_output_bytes: int) -> tuple[int, BoundedCapture]:
    """(a pipe's write end for the child, the capture reading its other end)."""
    r, w = os.pipe()
    return w, BoundedCapture(r, head_bytes(max_output_bytes), max_output_bytes)


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
    after_exit: Callable[[subprocess.Popen], None] | None = None,
    pass_fds: tuple[int, ...] = (),
) -> ProcessResult:
    """Start ``cmd`` in a new session, wait up to ``timeout_s``, kill its tree on timeout.
    ``after_exit(proc)`` runs once it ended, before its output is collected (kill what it left
    running there: they hold its pipes)."""
    with contextlib.ExitStack() as stack:
        in_f: BinaryIO | int = subprocess.DEVNULL
        if isinstance(stdin, (str, bytes)):
            staged = stack.enter_context(tempfile.TemporaryFile(dir=tmp_dir))
            staged.write(stdin.encode() if isinstance(stdin, str) else stdin)
            staged.seek(0)
            in_f = staged
        elif stdin is not None:
            in_f = stdin
        out_w: BinaryIO | int
        captures: list[BoundedCapture] = []
        if stdout_path is not None:
            out_w = stack.enter_context(open(stdout_path, "wb"))
        else:
            out_w, cap = _capture(max_output_bytes)
            captures.append(cap)
        err_w, err_cap = _capture(max_output_bytes)
        timed_out = False
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(
                cmd,
                env=env,
                cwd=cwd,
                stdin=in_f,
                stdout=out_w,
                stderr=err_w,
                start_new_session=True,
                pass_fds=pass_fds,
            )
        except BaseException:
            for cap in (*captures, err_cap):
                cap.result(0)
            raise
        finally:  # the child holds its copies; the captures see EOF once every writer is gone
            for w in (out_w, err_w):
                if isinstance(w, int):
                    os.close(w)
        if on_start is not None:
            on_start(proc)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_tree(proc)
            rc = proc.wait()
        duration = time.monotonic() - t0
        if after_exit is not None:
            after_exit(proc)
        stdout, dropped = captures[0].result(DRAIN_WAIT_S) if captures else ("", 0)
        stderr, err_dropped = err_cap.result(DRAIN_WAIT_S)
    return ProcessResult(rc, stdout, stderr, timed_out, duration, output_dropped=dropped + err_dropped)
