"""The orphan reaper kills an engine's child processes when their owner dies without cleaning up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

OWNER = textwrap.dedent(
    """
    import subprocess, sys, time
    from harnessrl.engine.reaper import child_pids, start_reaper
    before = child_pids()
    kids = [subprocess.Popen(["sleep", "300"]) for _ in range(2)]
    start_reaper(child_pids() - before)
    print(" ".join(str(k.pid) for k in kids), flush=True)
    time.sleep(300)
    """
)


def _wait_gone(pids: list[int], timeout_s: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [p for p in alive if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        time.sleep(0.1)
    return alive


def test_children_die_with_a_sigkilled_owner():
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True)
    try:
        kids = [int(p) for p in owner.stdout.readline().split()]
        assert len(kids) == 2 and all(psutil.pid_exists(p) for p in kids)
        os.kill(owner.pid, signal.SIGKILL)  # no cleanup code of the owner runs
        owner.wait(timeout=10)
        assert _wait_gone(kids) == []
    finally:
        if owner.poll() is None:
            owner.kill()


def test_stop_reaper_kills_what_is_left_and_ignores_recycled_pids():
    from harnessrl.engine.reaper import start_reaper, stop_reaper

    kid = subprocess.Popen(["sleep", "300"])
    reaper = start_reaper([kid.pid, 999_999_999])  # a pid that does not exist is skipped
    assert reaper is not None
    stop_reaper(reaper)
    kid.wait(timeout=10)
    assert kid.returncode == -signal.SIGKILL


def test_stop_reaper_kills_the_targets_itself_when_the_watchdog_is_late():
    """On a starved machine the watchdog may not have started when stop_reaper gives up on it: the
    targets must still die (before, only the watchdog was killed and the targets lived on)."""
    from harnessrl.engine.reaper import start_reaper, stop_reaper

    kid = subprocess.Popen(["sleep", "300"])
    reaper = start_reaper([kid.pid])
    stop_reaper(reaper, timeout_s=0.001)  # the watchdog's interpreter cannot be up yet
    kid.wait(timeout=10)  # `sleep 300` ended: killed (its status may read 0: psutil reaped our own child)


@pytest.mark.parametrize("pids", [[], [999_999_999]])
def test_nothing_to_watch_starts_nothing(pids):
    from harnessrl.engine.reaper import start_reaper

    assert start_reaper(pids) is None


VLLM_OWNER = textwrap.dedent(
    """
    import time, psutil
    from harnessrl.engine.model import resolve_model
    from harnessrl.engine.vllm_engine import VLLMEngine
    if __name__ == "__main__":
        engine = VLLMEngine(str(resolve_model(None)), max_model_len=512, max_num_seqs=4, kv_cache_gib=0.5)
        kids = [p.pid for p in psutil.Process().children(recursive=True)]
        print("PIDS", *kids, flush=True)
        time.sleep(600)
    """
)


@pytest.mark.vllm
def test_vllm_engine_core_dies_with_a_sigkilled_owner(tmp_path):
    script = tmp_path / "owner.py"
    script.write_text(VLLM_OWNER)
    owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        line = next(ln for ln in owner.stdout if ln.startswith("PIDS"))  # vLLM logs to stdout too
        kids = [int(p) for p in line.split()[1:]]
        assert kids, "the engine started no child process"
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(timeout=10)
        assert _wait_gone(kids, timeout_s=60) == []
    finally:
        if owner.poll() is None:
            owner.kill()
