"""Reading groups of rollouts back from a run store: by plan (the training loop trains exactly what
was recorded) or by the group ids found in the store (`harnessrl tree`); and whether a group can
teach anything (`group_outcome`: a group whose rollouts all get the same reward has no contrast)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harnessrl.rollout.pass_at_k import rollout_passed
from harnessrl.rollout.plan import GroupPlan
from harnessrl.store.records import CallRecord, RolloutRecord, is_scored

MIXED = "mixed"  # group_outcome of a group with contrast; the others say why it has none
UNIFORM_OUTCOMES = ("all_fail", "all_pass", "same_score", "unscored")


@dataclass
class PlannedGroup:
    """A planned group as recorded: its rollouts (by sample index) and their calls (by rollout, seq)."""

    plan: GroupPlan
    rollouts: list[RolloutRecord]
    calls: list[CallRecord]


@dataclass(frozen=True)
class StoredGroup:
    """The rollouts that share one group id in a store (plan unknown)."""

    group_id: str
    task_id: str
    rollouts: list[RolloutRecord]


def _by_sample(rollouts: Sequence[RolloutRecord]) -> list[RolloutRecord]:
    return sorted(rollouts, key=lambda r: (r.sample_idx, r.rollout_id))


def group_calls(store: Any, rollouts: Sequence[RolloutRecord], as_arrays: bool = False) -> list[CallRecord]:
    """The calls of the rollouts, ordered by rollout id, then seq."""
    if not rollouts:
        return []
    calls = store.list_calls([r.rollout_id for r in rollouts], as_arrays=as_arrays)
    return sorted(calls, key=lambda c: (c.rollout_id, c.seq))


def read_groups(store: Any, plans: Sequence[GroupPlan]) -> list[PlannedGroup]:
    """The recorded rollouts and calls of each planned group.

    Calls are read with ids, provenance and logprobs as numpy arrays: the tree builder works on
    arrays, and this skips a Python int per token (the tree build is ~3x faster, benchmarks.md)."""
    out = []
    for plan in plans:
        rollouts = _by_sample(store.list_rollouts(group_id=plan.group_id))
        out.append(PlannedGroup(plan, rollouts, group_calls(store, rollouts, as_arrays=True)))
    return out


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
        members = _by_sample(members)
        out.append(StoredGroup(group_id=gid, task_id=members[0].task_id, rollouts=members))
    return out


def trained_outcome(rollout: RolloutRecord, task: Any, reward: str) -> float:
    """The outcome a rollout is trained on: 1/0 for pass/fail (algorithm.reward "pass"), else its
    reward (algorithm.reward "score", partial credit included)."""
    if reward == "pass":
        return float(rollout_passed(rollout, task))
    return float(rollout.reward) if rollout.reward is not None else 0.0


def counted(rollouts: Sequence[RolloutRecord], fresh_only: bool = False) -> list[RolloutRecord]:
    """The rollouts whose reward trains: scored, and not a branch that diverged from its parent
    (tree/filters.py); `fresh_only`: the group's own samples, without its branches."""
    return [r for r in rollouts if is_scored(r.status, r.reward)
            and (r.lineage is None or (not fresh_only and not r.lineage.diverged))]


def group_outcome(rollouts: Sequence[RolloutRecord], task: Any, reward: str = "pass",
                  fresh_only: bool = False) -> str:
    """MIXED when the group's counted rollouts got at least two different trained outcomes; else
    why it has no contrast: all_fail, all_pass, same_score (one partial score) or unscored (no
    rollout was scored: infrastructure failures)."""
    kept = counted(rollouts, fresh_only)
    if not kept:
        return "unscored"
    if len({trained_outcome(r, task, reward) for r in kept}) > 1:
        return MIXED
    if all(rollout_passed(r, task) for r in kept):
        return "all_pass"
    return "same_score" if reward == "score" and trained_outcome(kept[0], task, reward) > 0 else "all_fail"
