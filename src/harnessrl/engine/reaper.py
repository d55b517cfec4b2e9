"""Orphan reaper: child processes (vLLM's engine core and workers) must not outlive us.

vLLM runs its engine core and workers as separate processes. When the process that owns the engine
dies without shutting it down (SIGKILL, the kernel's OOM killer, a pytest timeout), those processes
are re-parented to init and keep their RAM and a busy-polling core. `start_reaper(pids)` starts a
tiny watchdog that holds the read end of a pipe whose write end only we hold: when we die for any
reason the pipe reaches EOF and the watchdog SIGKILLs the recorded processes and their descendants
(checking each one's start time, so a recycled pid is never hit).
"""

from __future__ import annotations

import inspect
import json
import subprocess
import sys

import psutil


def kill_targets(targets: list[tuple[int, float]]) -> None:
    """SIGKILL each (pid, start time) that still runs with that start time, and its descendants
    (what the watchdog does at EOF)."""
    procs: list[psutil.Process] = []
    for pid, created in targets:
        try:
            p = psutil.Process(pid)
            if abs(p.create_time() - created) < 0.01:
                procs += [p, *p.children(recursive=True)]
        except psutil.Error:
            pass
    for p in procs:
        try:
            p.kill()
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=10)


# the watchdog: a separate interpreter that runs kill_targets (this very source) once its stdin ends
_WATCHDOG = (
    "import json, sys\nimport psutil\n\n"
    + inspect.getsource(kill_targets)
    + "\ntargets = json.loads(sys.argv[1])\n"
    + "sys.stdin.buffer.read()  # returns at EOF: the owner closed the pipe or died\n"
    + "kill_targets(targets)\n"
)


def child_pids() -> set[int]:
    """Pids of all current descendants of this process."""
    return {p.pid for p in psutil.Process().children(recursive=True)}


def start_reaper(pids: set[int] | list[int]) -> subprocess.Popen[bytes] | None:
    """Watch `pids`; they are SIGKILLed when this process dies or `stop_reaper` is called."""
    targets = []
    for pid in sorted(pids):
        try:
            targets.append((pid, psutil.Process(pid).create_time()))
        except psutil.Error:
            continue
    if not targets:
        return None
    return subprocess.Popen(
        [sys.executable, "-I", "-c", _WATCHDOG, json.dumps(targets)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # a signal to our process group must not take the watchdog with it
    )


def stop_reaper(proc: subprocess.Popen[bytes] | None, timeout_s: float = 15.0) -> None:
    """Close the pipe (the watchdog kills whatever of its targets still runs) and wait for it."""
    if proc is None:
        return
    if proc.stdin is not None:
        proc.stdin.close()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:  # a starved machine: the watchdog has not even started; do its work
        proc.kill()
        argv = proc.args if isinstance(proc.args, list) else ["[]"]  # start_reaper's argv ends with the targets
        kill_targets([(int(pid), float(created)) for pid, created in json.loads(argv[-1])])
