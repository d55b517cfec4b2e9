"""Admission of rollouts by free memory: the fix for runs killed by the kernel's OOM killer.

`concurrency` bounds how many rollouts run at once, but not what they hold: 12 OpenClaw rollouts
(~0.8 GiB of Node each) beside a trainer that keeps ~8 GiB after an update took a 24 GiB machine
past its memory, and the kernel killed the whole run. A `MemoryGate` holds a rollout back before
its sandbox starts while the machine's available memory is under a reserve, so the run slows down
instead of dying. It never holds the only rollout: when none of the gate's rollouts runs, the next
one starts whatever the memory says (a run always makes progress; the sandbox's own memory limit
still bounds it). A harness needs a few seconds before its memory shows in the counters, so every
rollout started in the last `settle_s` counts as `start_mib` more in use.

    gate = MemoryGate(reserve_mib=2048)
    with gate.admit() as waited_s:   # blocks while memory is short and others run
        ...run the rollout...
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

MIB = 1024 * 1024


def available_mib() -> float:
    """The machine's available memory (what can be allocated without swapping), in MiB."""
    import psutil

    return psutil.virtual_memory().available / MIB


class MemoryGate:
    """Thread-safe; one per batch of rollouts (`run_plans` call). `reserve_mib <= 0` admits all."""

    def __init__(self, reserve_mib: float, *, start_mib: float = 512.0, settle_s: float = 15.0,
                 poll_s: float = 0.5, available: Callable[[], float] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.reserve_mib, self.start_mib, self.settle_s, self.poll_s = reserve_mib, start_mib, settle_s, poll_s
        self._available, self._clock = available, clock  # None: available_mib()
        self._cond = threading.Condition()
        self._running = 0
        self._starts: list[float] = []  # start times within the last settle_s
        self.held = 0  # rollouts that had to wait
        self.waited_s = 0.0  # their waiting time, summed

    def _free_enough(self) -> bool:
        now = self._clock()
        self._starts = [t for t in self._starts if now - t < self.settle_s]
        free = self._available() if self._available is not None else available_mib()
        return free - len(self._starts) * self.start_mib >= self.reserve_mib

    def acquire(self) -> float:
        """Block until this rollout may start; returns the seconds it waited."""
        t0 = self._clock()
        with self._cond:
            if self.reserve_mib > 0:
                while self._running > 0 and not self._free_enough():
                    self._cond.wait(self.poll_s)
            self._running += 1
            self._starts.append(self._clock())
            waited = self._clock() - t0
            if waited > self.poll_s / 2:
                self.held += 1
                self.waited_s += waited
        return waited

    def release(self) -> None:
        with self._cond:
            self._running -= 1
            self._cond.notify_all()

    @contextmanager
    def admit(self) -> Iterator[float]:
        waited = self.acquire()
        try:
            yield waited
        finally:
            self.release()
