"""The collector seam between the loop and the rollout side.

A `Collector` runs planned groups (task x harness x n) so that their calls land in the store
(through the proxy) and one RolloutRecord per rollout is put there, with `group_id` from the plan.
The loop then reads groups back from the store only (`rollout.groups.read_groups`), so what is
trained is exactly what was recorded. `RunnerCollector` (runner_collector.py) drives the real job runner;
tests pass in-process fakes. `RolloutsAhead` runs a collector in the background for the steps
ahead of the one that trains.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Protocol, Sequence

from harnessrl.rollout.plan import GroupPlan

Progress = Callable[..., None]  # progress(n, harness=None, status=None): n more rollouts of that harness ended so


class Collector(Protocol):
    def run(self, plans: Sequence[GroupPlan], progress: Progress | None = None) -> None:
        """Run every rollout of the plans; calls and RolloutRecords end up in the run store."""
        ...

    def close(self) -> None: ...


class RolloutsAhead:
    """Rollouts of later steps running in the background while a step trains and syncs
    (asynchronous rollouts, loop.max_policy_lag > 0): one future per step, in a thread pool of
    `workers` threads started on first use."""

    def __init__(self, workers: int):
        self.workers = workers
        self._pool: ThreadPoolExecutor | None = None
        self._running: dict[int, Future[None]] = {}

    def start(self, step: int, collector: Collector, plans: Sequence[GroupPlan]) -> None:
        """Start the step's rollouts unless they are running already."""
        if step in self._running:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="rollouts-ahead")
        self._running[step] = self._pool.submit(collector.run, plans, None)

    def wait(self, step: int) -> bool:
        """Wait for the step's rollouts if they were started ahead (False: they were not)."""
        future = self._running.pop(step, None)
        if future is None:
            return False
        future.result()
        return True

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
