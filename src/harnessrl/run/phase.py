"""How a phase of a step runs: `timed` adds its wall (and CPU) seconds to the step's record, and
`run_shown` runs rollouts with a progress bar per harness."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator, Sequence

from harnessrl.profile.run_profile import CpuMeter
from harnessrl.report.display import RunDisplay
from harnessrl.rollout.plan import GroupPlan
from harnessrl.run.collector_seam import Collector


@contextmanager
def timed(times: dict[str, float], key: str, cpu: CpuMeter | None = None) -> Iterator[None]:
    """Add the seconds the block takes to times[key] (and its CPU seconds to `cpu`'s phase key)."""
    t0, c0 = time.perf_counter(), cpu.begin() if cpu is not None else {}
    try:
        yield
    finally:
        times[key] = times.get(key, 0.0) + time.perf_counter() - t0
        if cpu is not None:
            cpu.end(key, c0)


def run_shown(collector: Collector, plans: Sequence[GroupPlan], display: RunDisplay) -> None:
    """Run the plans' rollouts with a progress bar per harness."""
    advance, close = display.rollouts(plans)
    try:
        collector.run(plans, advance)
    finally:
        close()
