"""Plain progress lines (harnessrl/plain_progress.py): start, progress with statuses and rate, end;
a heartbeat while nothing finishes; quiet phases stay silent unless they stall."""

from __future__ import annotations

import threading

import pytest

from harnessrl.plain_progress import PlainProgress, rate


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_start_progress_and_end_lines_with_statuses_and_rate():
    lines: list[str] = []
    clock = Clock()
    p = PlainProgress("step 1/4 · rollouts", lines.append, total=4, every_s=0, clock=clock)
    with p:
        clock.t += 30
        p.advance(1, "ok")
        clock.t += 30
        p.advance(1, "timeout")
        p.advance(1, "ok")
        clock.t += 30
        p.advance(1, "ok")
    assert lines[0] == "step 1/4 · rollouts: start, 0/4 rollouts"
    assert lines[1] == "step 1/4 · rollouts: 1/4 rollouts (ok 1), 2.0/min, 0:30"
    assert lines[3] == "step 1/4 · rollouts: 3/4 rollouts (ok 2, timeout 1), 3.0/min, 1:00"
    assert lines[-1] == "step 1/4 · rollouts: done 4/4 rollouts (ok 3, timeout 1), 2.7/min, 1:30"
    assert len(lines) == 6


def test_lines_are_spaced_by_the_interval():
    lines: list[str] = []
    clock = Clock()
    with PlainProgress("eval", lines.append, total=10, every_s=1e6, clock=clock) as p:
        for _ in range(9):
            p.advance()
        clock.t += 2e6
        p.advance()  # the interval has passed: a line
    assert [line.split(": ")[1].split(",")[0] for line in lines] == ["start", "10/10 rollouts", "done 10/10 rollouts"]


def test_heartbeat_while_nothing_finishes():
    seen = threading.Event()
    lines: list[str] = []

    def write(line: str) -> None:
        lines.append(line)
        if len(lines) >= 2:
            seen.set()

    with PlainProgress("step 1/1 · train (tree-packed update)", write, every_s=0.05):
        assert seen.wait(timeout=60), lines  # a line came without any advance
    assert lines[0].endswith(": start, running")
    assert ": running, 0:" in lines[1]
    assert lines[-1].startswith("step 1/1 · train (tree-packed update): done in 0:")


def test_quiet_phase_prints_only_once_it_stalls():
    lines: list[str] = []
    clock = Clock()
    with PlainProgress("tree", lines.append, every_s=1e6, quiet=True, clock=clock):
        pass
    assert lines == []
    seen = threading.Event()
    with PlainProgress("sync", lambda line: (lines.append(line), seen.set()), every_s=0.05, quiet=True):
        assert seen.wait(timeout=60)
    assert lines[0].startswith("sync: running") and lines[-1].startswith("sync: done in")


def test_a_broken_writer_never_fails_the_phase_and_bad_interval_is_refused():
    def broken(line: str) -> None:
        raise OSError("closed")

    with PlainProgress("x", broken, total=1, every_s=0) as p:
        p.advance()
    with pytest.raises(ValueError, match="every_s"):
        PlainProgress("x", print, every_s=-1)
    assert rate(3, 1.0) == "3.0/s" and rate(1, 120.0) == "0.5/min"
