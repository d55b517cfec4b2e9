"""Groups of rollouts as a run store holds them: the rollouts that share a group id (`harnessrl
tree`, the run's trees), their calls in order, and the rollouts of a training run's last attempt
per step (a resumed run redoes a step; only its last attempt trained). Planned groups, read back by
their plans, are rollout/groups.py."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harnessrl.store.records import CallRecord, RolloutRecord

if TYPE_CHECKING:
    from harnessrl.store.run_store import RunStore


@dataclass(frozen=True)
class StoredGroup:
    """The rollouts that share one group id in a store (plan unknown)."""

    group_id: str
    task_id: str
    rollouts: list[RolloutRecord]


def by_sample(rollouts: Sequence[RolloutRecord]) -> list[RolloutRecord]:
    """The rollouts in sample order (rollout id breaks a tie)."""
    return sorted(rollouts, key=lambda r: (r.sample_idx, r.rollout_id))


def group_calls(store: RunStore, rollouts: Sequence[RolloutRecord], as_arrays: bool = False) -> list[CallRecord]:
    """The calls of the rollouts, ordered by rollout id, then seq."""
    if not rollouts:
        return []
    calls = store.list_calls([r.rollout_id for r in rollouts], as_arrays=as_arrays)
    return sorted(calls, key=lambda c: (c.rollout_id, c.seq))


# The planned group ids (rollout/plan.py): [<split>-]s<step>-a<attempt>-...
_ATTEMPT = re.compile(r"^(?:(.+?)-)?s(\d+)-a(\d+)-")


def drop_abandoned_attempts(rollouts: Sequence[RolloutRecord]) -> list[RolloutRecord]:
    """The rollouts without those of abandoned attempts. A run resumed after a crash
    (`train --resume`) redoes the interrupted step under a new attempt number, and only the last
    attempt of a step trained: the earlier attempts' rollouts stay in the store but are not part
    of the run's trees. Rollouts whose group id is not a planned one are all kept. Only for
    training runs: there a later attempt on the same (split, step) is always a redo."""
    latest: dict[tuple[str, int], int] = {}
    for r in rollouts:
        if m := _ATTEMPT.match(r.group_id):
            key = (m[1] or "", int(m[2]))
            latest[key] = max(latest.get(key, 0), int(m[3]))
    return [r for r in rollouts
            if not (m := _ATTEMPT.match(r.group_id)) or int(m[3]) == latest[(m[1] or "", int(m[2]))]]


def group_rollouts(rollouts: Sequence[RolloutRecord], task: str | None = None,
                   group: str | None = None) -> list[StoredGroup]:
    """Rollouts grouped by group_id (first-seen order), optionally only one task / group."""
    groups: dict[str, list[RolloutRecord]] = {}
    for r in rollouts:
        if (task is None or r.task_id == task) and (group is None or r.group_id == group):
            groups.setdefault(r.group_id, []).append(r)
    out = []
    for gid, members in groups.items():
        members = by_sample(members)
        out.append(StoredGroup(group_id=gid, task_id=members[0].task_id, rollouts=members))
    return out
