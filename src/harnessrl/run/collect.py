"""The collector seam between the loop and the rollout side.

A `Collector` runs planned groups (task x harness x n) so that their calls land in the store
(through the proxy) and one RolloutRecord per rollout is put there, with `group_id` from the plan.
The loop then reads groups back from the store only (`rollout.groups.read_groups`), so what is
trained is exactly what was recorded. `RunnerCollector` (collector.py) drives the real job runner;
tests pass in-process fakes.
"""

from __future__ import annotations

from typing import Callable, Protocol, Sequence

from harnessrl.rollout.plan import GroupPlan

Progress = Callable[..., None]  # progress(n, harness=None): n more rollouts of that harness finished


class Collector(Protocol):
    def run(self, plans: Sequence[GroupPlan], progress: Progress | None = None) -> None:
        """Run every rollout of the plans; calls and RolloutRecords end up in the run store."""
        ...

    def close(self) -> None: ...
