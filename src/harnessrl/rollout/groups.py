"""Reading planned groups of rollouts back from a run store (the training loop trains exactly what
was recorded; groups by the ids found in a store are store/groups.py), and whether a group can
teach anything (`group_outcome`: a group whose rollouts all get the same reward has no contrast)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harnessrl.rollout.plan import GroupPlan
from harnessrl.store.groups import by_sample, group_calls
from harnessrl.store.records import CallRecord, PassRule, RolloutRecord, is_scored, rollout_passed

if TYPE_CHECKING:
    from harnessrl.store.run_store import RunStore

MIXED = "mixed"  # group_outcome of a group with contrast; the others say why it has none
UNIFORM_OUTCOMES = ("all_fail", "all_pass", "same_score", "unscored")


@dataclass
class PlannedGroup:
    """A planned group as recorded: its rollouts (by sample index) and their calls (by rollout, seq)."""

    plan: GroupPlan
    rollouts: list[RolloutRecord]
    calls: list[CallRecord]


def read_groups(store: RunStore, plans: Sequence[GroupPlan]) -> list[PlannedGroup]:
    """The recorded rollouts and calls of each planned group.

    Calls are read with ids, provenance and logprobs as numpy arrays: the tree builder works on
    arrays, and this skips a Python int per token (the tree build is ~3x faster, benchmarks.md)."""
    out = []
    for plan in plans:
        rollouts = by_sample(store.list_rollouts(group_id=plan.group_id))
        out.append(PlannedGroup(plan, rollouts, group_calls(store, rollouts, as_arrays=True)))
    return out


def trained_outcome(rollout: RolloutRecord, task: PassRule | None, reward: str) -> float:
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


def group_outcome(rollouts: Sequence[RolloutRecord], task: PassRule | None, reward: str = "pass",
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
