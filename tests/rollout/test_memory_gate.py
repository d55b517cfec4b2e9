"""MemoryGate: rollouts are held back while memory is short, never the only one, and the runner
records how long a rollout was held."""

from __future__ import annotations

import threading
import time

from harnessrl.rollout.jobs import RunOptions, run_plans
from harnessrl.rollout.memory_gate import MemoryGate
from harnessrl.rollout.plan import plan_cross
from harnessrl.sandbox.base import SandboxConfig


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def test_off_admits_everything_at_once():
    gate = MemoryGate(0, available=lambda: 0.0)
    for _ in range(5):
        assert gate.acquire() < 0.05
    assert gate.held == 0


def test_the_only_rollout_always_starts_and_others_wait_for_memory():
    free = {"mib": 100.0}
    gate = MemoryGate(1024, start_mib=0, poll_s=0.01, available=lambda: free["mib"])
    gate.acquire()  # none running: admitted whatever the memory says
    started = threading.Event()

    def second():
        gate.acquire()
        started.set()

    t = threading.Thread(target=second, daemon=True)
    t.start()
    assert not started.wait(0.3)  # memory short, one running: held
    gate.release()  # the running one ends: none running -> admitted
    assert started.wait(5)
    t.join(5)
    assert gate.held == 1 and gate.waited_s > 0.2


def test_memory_freed_admits_a_held_rollout():
    free = {"mib": 100.0}
    gate = MemoryGate(1024, start_mib=0, poll_s=0.01, available=lambda: free["mib"])
    gate.acquire()
    started = threading.Event()
    t = threading.Thread(target=lambda: (gate.acquire(), started.set()), daemon=True)
    t.start()
    assert not started.wait(0.2)
    free["mib"] = 4096.0  # memory comes back while the first one still runs
    assert started.wait(5)
    t.join(5)


def test_recent_starts_count_until_they_settle():
    clock = FakeClock()
    gate = MemoryGate(1000, start_mib=600, settle_s=10, available=lambda: 2000.0, clock=clock)
    gate.acquire()  # 2000 - 0 >= 1000
    assert gate._free_enough()  # 2000 - 600 >= 1000
    gate.acquire()
    assert not gate._free_enough()  # 2000 - 1200 < 1000: a third would wait
    clock.t = 11.0  # both have settled: their memory is in `available` now
    assert gate._free_enough()


def test_run_plans_records_the_time_a_rollout_was_held(proxy, store, tasks, monkeypatch):
    """Memory always short: the batch runs one rollout at a time, each after the previous one ended,
    and the held ones carry durations['memory_wait_s']."""
    monkeypatch.setattr("harnessrl.rollout.memory_gate.available_mib", lambda: 1.0)
    running, peak = [0], [0]
    lock = threading.Lock()
    from harnessrl.rollout import jobs

    real = jobs._attempts

    def counted(*a, **kw):
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.2)
        try:
            return real(*a, **kw)
        finally:
            with lock:
                running[0] -= 1

    monkeypatch.setattr(jobs, "_attempts", counted)
    plans = plan_cross(tasks[:1], ["command:true"], 3, step=0, attempt=0, split="rollout")
    opts = RunOptions(sandbox_cfg=SandboxConfig(type="local"), memory_reserve_gib=0.5)
    records = run_plans(plans, proxy=proxy, store=store, opts=opts, concurrency=3)
    assert peak[0] == 1  # never two at once
    assert {r.status for r in records} == {"ok"}
    assert sum("memory_wait_s" in r.durations for r in records) == 2
