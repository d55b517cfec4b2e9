"""Progress of a long phase as plain lines, for logs: what a run shows when stdout is not a terminal.

A live bar (rich) draws nothing into a pipe or a file, so in CI, under `nohup` or `| tee` a busy run
would look like a hung one. `PlainProgress` prints instead a line when the phase starts, one at
least every `every_s` seconds while it runs (also when nothing finished in between), and one when
it ends: done/total, the statuses so far and the rate.

    step 2/4 · rollouts: start, 0/16 rollouts
    step 2/4 · rollouts: 9/16 rollouts (ok 8, timeout 1), 2.1/min, 4:17
    step 2/4 · rollouts: done 16/16 rollouts (ok 14, timeout 2), 2.0/min, 8:02

A phase without a total (the update) prints its elapsed time. `every_s=0` prints a line on every
advance (and starts no timer thread). A `quiet` phase prints nothing until it has run `every_s`
(short phases stay out of the log unless they stall).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Callable


class PlainProgress:
    """Plain progress lines of one phase (a context manager); `write` takes one line."""

    def __init__(self, name: str, write: Callable[[str], None], total: int | None = None, every_s: float = 30.0,
                 unit: str = "rollouts", quiet: bool = False, clock: Callable[[], float] = time.monotonic):
        if every_s < 0:
            raise ValueError(f"every_s must be >= 0, got {every_s}")
        self.name, self.total, self.every_s, self.unit, self.quiet = name, total, every_s, unit, quiet
        self._write, self._clock = write, clock
        self.done = 0
        self.statuses: Counter[str] = Counter()
        self._lock = threading.RLock()  # one line at a time; counts read whole
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = self._last = 0.0
        self._printed = False
        self._closed = False

    def __enter__(self) -> PlainProgress:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()

    def start(self) -> None:
        self._t0 = self._last = self._clock()
        if not self.quiet:
            with self._lock:
                self._line("start, " + self._count())
        if self.every_s > 0:
            self._thread = threading.Thread(target=self._beat, name=f"progress-{self.name}", daemon=True)
            self._thread.start()

    def advance(self, n: int = 1, status: str | None = None) -> None:
        """n more done (with that status, when the caller knows it)."""
        with self._lock:
            self.done += n
            if status:
                self.statuses[status] += n
            if self._clock() - self._last >= self.every_s and not self._closed and (self._printed or not self.quiet):
                self._line(self._state())

    def finish(self) -> None:
        """The closing line (a quiet phase that printed nothing stays silent); idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            if self._printed or not self.quiet:
                self._line("done " + self._state())

    def _beat(self) -> None:
        while not self._stop.wait(self._wait_s()):
            with self._lock:
                if self._clock() - self._last >= self.every_s and not self._closed:
                    self._line(self._state())

    def _wait_s(self) -> float:
        return max(0.05, self.every_s - (self._clock() - self._last))

    def _count(self) -> str:
        return f"{self.done}/{self.total} {self.unit}" if self.total is not None else "running"

    def _state(self) -> str:
        elapsed = self._clock() - self._t0
        if self.total is None:
            return f"{self._count()}, {hms(elapsed)}" if not self._closed else f"in {hms(elapsed)}"
        parts = [self._count()]
        if self.statuses:
            parts[0] += " (" + ", ".join(f"{k} {v}" for k, v in self.statuses.most_common()) + ")"
        if self.done and elapsed > 0:
            parts.append(rate(self.done, elapsed))
        parts.append(hms(elapsed))
        return ", ".join(parts)

    def _line(self, text: str) -> None:
        """Write one line (the caller holds the lock)."""
        self._last = self._clock()
        self._printed = True
        try:
            self._write(f"{self.name}: {text}")
        except (OSError, ValueError):  # a closed log must not end the run
            pass


def rate(done: int, seconds: float) -> str:
    """3 done in 90 s -> "2.0/min"; per second from 1/s on."""
    per_s = done / seconds
    return f"{per_s:.1f}/s" if per_s >= 1 else f"{60 * per_s:.1f}/min"


def hms(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"
