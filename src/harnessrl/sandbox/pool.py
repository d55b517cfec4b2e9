"""A warm pool: fresh single-use things (sandboxes) made ahead of need, in order, by a background
thread, so their start-up overlaps the work of the ones already handed out (issue 43 item 4).

    pool = WarmPool([lambda: make_sandbox(cfg_i, ...) for ...], depth=2, destroy=lambda sb: sb.destroy())
    with pool:
        sb = pool.take(0)   # item 0, made ahead (or None: make your own)
        ...

Rules, each one a test (tests/sandbox/test_pool.py):
- Single use. Item i is handed out once, by ``take(i)``; a second ``take(i)`` gets None. Nothing is
  ever given back or reused: an item that was taken is the taker's to destroy.
- Bounded. At most ``depth`` items are made and not yet taken (plus the one being made).
- Nothing left behind. ``close()`` stops making and destroys every item made but not taken
  (also one whose maker was still running at close).
- Never worse than no pool. ``take(i)`` of an item not started yet claims it (the pool skips it)
  and returns None at once; one whose maker raised returns None too: the caller makes its own,
  through its usual path, which then reports the failure as it always did.

Thread-safe: many threads may ``take`` at once (the rollout runner's workers)."""

from __future__ import annotations

import threading
from typing import Callable, Generic, Sequence, TypeVar

T = TypeVar("T")

_PENDING, _MAKING, _READY, _GONE = "pending", "making", "ready", "gone"


class WarmPool(Generic[T]):
    def __init__(self, makers: Sequence[Callable[[], T]], depth: int, destroy: Callable[[T], None]) -> None:
        if depth < 1:
            raise ValueError(f"a warm pool needs depth >= 1, got {depth}")
        self._makers = list(makers)
        self._depth = depth
        self._destroy = destroy
        self._state = [_PENDING] * len(self._makers)
        self._items: dict[int, T] = {}
        self._cv = threading.Condition()
        self._closed = False
        self.made = 0  # items made (counted for reports/tests)
        self.hits = 0  # takes served by a made item
        self._thread = threading.Thread(target=self._fill, name="warm-pool", daemon=True)
        self._thread.start()

    def __len__(self) -> int:
        return len(self._makers)

    def _ready_count(self) -> int:
        return sum(s == _READY for s in self._state)

    def _fill(self) -> None:
        for i, make in enumerate(self._makers):
            with self._cv:
                while not self._closed and self._ready_count() >= self._depth:
                    self._cv.wait()
                if self._closed:
                    return
                if self._state[i] != _PENDING:  # claimed by a take before its turn came
                    continue
                self._state[i] = _MAKING
            try:
                item = make()
            except Exception:  # noqa: BLE001 - the taker makes its own and reports the failure
                with self._cv:
                    self._state[i] = _GONE
                    self._cv.notify_all()
                continue
            with self._cv:
                if self._closed:  # closed while making: nobody will take it
                    self._state[i] = _GONE
                    doomed: T | None = item
                else:
                    self._state[i] = _READY
                    self._items[i] = item
                    self.made += 1
                    doomed = None
                self._cv.notify_all()
            if doomed is not None:
                self._destroy(doomed)

    def take(self, i: int) -> T | None:
        """Item i, made ahead, handed out once; None when it was not made (not started yet, its maker
        failed, taken before, or the pool is closed): then make your own."""
        with self._cv:
            if not 0 <= i < len(self._state):
                return None
            if self._state[i] == _PENDING:  # not started: claim it, never made
                self._state[i] = _GONE
                return None
            while self._state[i] == _MAKING and not self._closed:
                self._cv.wait()
            if self._state[i] != _READY:
                return None
            self._state[i] = _GONE
            self.hits += 1
            self._cv.notify_all()
            return self._items.pop(i)

    def close(self) -> None:
        """Stop making; destroy every item made and not taken. Idempotent."""
        with self._cv:
            self._closed = True
            doomed = list(self._items.values())
            self._items.clear()
            self._state = [_GONE if s in (_READY, _PENDING) else s for s in self._state]
            self._cv.notify_all()
        for item in doomed:
            try:
                self._destroy(item)
            except Exception:  # noqa: BLE001 - best effort: the next one must still go
                pass
        self._thread.join(timeout=60)

    def __enter__(self) -> WarmPool[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
