"""The warm pool's rules (sandbox/pool.py) on plain objects: single use, bounded depth, nothing
left behind at close, and never worse than no pool (a missing or failed item is made by the taker)."""

from __future__ import annotations

import threading
import time

import pytest

from harnessrl.sandbox.pool import WarmPool


class Item:
    def __init__(self, i: int) -> None:
        self.i, self.destroyed = i, False


def wait_for(cond, timeout_s: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.01)
    return False


def make_pool(n: int, depth: int, made: list[Item], fail: set[int] = frozenset(), gate=None):
    destroyed: list[Item] = []

    def maker(i: int):
        def make() -> Item:
            if gate is not None:
                gate.wait()
            if i in fail:
                raise RuntimeError(f"item {i} failed")
            it = Item(i)
            made.append(it)
            return it
        return make

    def destroy(it: Item) -> None:
        it.destroyed = True
        destroyed.append(it)

    return WarmPool([maker(i) for i in range(n)], depth, destroy), destroyed


def test_each_item_is_handed_out_once_in_its_own_slot():
    made: list[Item] = []
    pool, destroyed = make_pool(4, depth=4, made=made)
    with pool:
        got = [pool.take(i) for i in range(4)]
        assert [g.i for g in got] == [0, 1, 2, 3]
        assert all(pool.take(i) is None for i in range(4))  # a second take gets nothing
        assert pool.take(7) is None and pool.take(-1) is None
    assert destroyed == [] and pool.hits == 4  # taken items are the taker's: never destroyed by the pool


def test_at_most_depth_items_wait_untaken():
    made: list[Item] = []
    pool, _ = make_pool(6, depth=2, made=made)
    with pool:
        assert wait_for(lambda: len(made) == 2)
        time.sleep(0.2)
        assert len(made) == 2  # bounded: the third waits for a take
        assert pool.take(0).i == 0
        assert wait_for(lambda: len(made) == 3)


def test_close_destroys_what_was_made_and_not_taken():
    made: list[Item] = []
    pool, destroyed = make_pool(5, depth=3, made=made)
    assert wait_for(lambda: len(made) == 3)
    first = pool.take(0)
    pool.close()
    assert sorted(d.i for d in destroyed) == [1, 2] and not first.destroyed
    assert pool.take(1) is None and pool.take(4) is None
    pool.close()  # idempotent


def test_an_item_being_made_at_close_is_destroyed_when_done():
    made: list[Item] = []
    gate = threading.Event()
    pool, destroyed = make_pool(2, depth=1, made=made, gate=gate)
    time.sleep(0.1)  # item 0's maker is blocked on the gate
    closer = threading.Thread(target=pool.close)
    closer.start()
    time.sleep(0.1)
    gate.set()
    closer.join(10)
    assert [d.i for d in destroyed] == [0] and made[0].destroyed


def test_a_take_before_its_turn_or_after_a_failure_gets_none_and_the_pool_skips_it():
    made: list[Item] = []
    gate = threading.Event()
    pool, _ = make_pool(4, depth=1, made=made, fail={1}, gate=gate)
    with pool:
        assert pool.take(3) is None  # not started: claimed, the taker makes its own
        gate.set()
        assert pool.take(0).i == 0
        assert wait_for(lambda: len(made) == 2)  # 1 failed, 2 made
        assert pool.take(1) is None  # its maker raised
        assert pool.take(2).i == 2
        time.sleep(0.1)
        assert sorted(m.i for m in made) == [0, 2]  # 3 was never made


def test_depth_must_be_positive():
    with pytest.raises(ValueError):
        WarmPool([], 0, lambda it: None)


def test_the_run_config_knob_is_off_by_default_and_reaches_the_runner():
    import inspect

    from pydantic import ValidationError

    from harnessrl.config.sections import LoopConfig
    from harnessrl.run import runner_collector

    assert LoopConfig().warm_pool == 0 and LoopConfig(warm_pool=3).warm_pool == 3
    with pytest.raises(ValidationError):
        LoopConfig(warm_pool=-1)
    assert "warm=loop.warm_pool" in inspect.getsource(runner_collector.RunnerCollector.run)
