"""Rollout collection for the loop, and what the loop reads back from the run store.

A `Collector` runs planned groups (task x harness x n) so that their calls land in the store
(through the proxy) and one RolloutRecord per rollout is put there, with `group_id` from the plan.
The loop then reads groups back from the store only, so what is trained is exactly what was
recorded. `RunnerCollector` (collector.py) drives the real runner; tests pass in-process fakes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

import numpy as np

from harnessrl.store.records import CallRecord, RolloutRecord
from harnessrl.rollout.plan import GroupPlan

Progress = Callable[[int], None]  # advance by n finished rollouts


class Collector(Protocol):
    def run(self, plans: Sequence[GroupPlan], progress: Progress | None = None) -> None:
        """Run every rollout of the plans; calls and RolloutRecords end up in the run store."""
        ...

    def close(self) -> None: ...


@dataclass
class Group:
    plan: GroupPlan
    rollouts: list[RolloutRecord]
    calls: list[CallRecord]


def read_groups(store, plans: Sequence[GroupPlan]) -> list[Group]:
    """The recorded rollouts and calls of each planned group (calls ordered by rollout, seq).

    Calls are read with ids, provenance and logprobs as numpy arrays: the tree builder works on
    arrays, and this skips a Python int per token (the tree build is ~3x faster, benchmarks.md)."""
    out = []
    for plan in plans:
        rollouts = sorted(store.list_rollouts(group_id=plan.group_id), key=lambda r: (r.sample_idx, r.rollout_id))
        calls = store.list_calls([r.rollout_id for r in rollouts], as_arrays=True) if rollouts else []
        out.append(Group(plan, rollouts, sorted(calls, key=lambda c: (c.rollout_id, c.seq))))
    return out


def harness_summary(groups: Sequence[Group]) -> dict[str, dict[str, float]]:
    """Per harness: mean reward (ok rollouts), pass rate (all rollouts; abnormal = not passed),
    rollout count, failure count, calls per rollout."""
    acc: dict[str, dict[str, list[float]]] = {}
    for g in groups:
        for r in g.rollouts:
            a = acc.setdefault(r.harness, {"reward": [], "passed": [], "failed": [], "calls": []})
            ok = r.status == "ok" and r.reward is not None
            if ok:
                a["reward"].append(float(r.reward))
            a["passed"].append(float(ok and g.plan.task.passed(r.reward)))
            a["failed"].append(float(not ok))
            a["calls"].append(float(r.call_count))
    out: dict[str, dict[str, float]] = {"reward": {}, "pass_rate": {}, "rollouts": {}, "failed": {},
                                        "calls_per_rollout": {}}
    for h, a in acc.items():
        out["reward"][h] = float(np.mean(a["reward"])) if a["reward"] else 0.0
        out["pass_rate"][h] = float(np.mean(a["passed"])) if a["passed"] else 0.0
        out["rollouts"][h] = float(len(a["passed"]))
        out["failed"][h] = float(sum(a["failed"]))
        out["calls_per_rollout"][h] = float(np.mean(a["calls"])) if a["calls"] else 0.0
    return out


def pass_at_1(groups: Sequence[Group]) -> dict[str, float]:
    """Held-out pass@1 per harness (an abnormal rollout counts as a fail)."""
    return harness_summary(groups)["pass_rate"]
