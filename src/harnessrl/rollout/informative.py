"""Informative groups (`loop.dynamic_sampling`): a group whose rollouts all get the same reward
teaches GRPO nothing, so it is left out of the update and, within a bounded budget per step,
replaced by a fresh group (DAPO's dynamic sampling, over rollouts of real harnesses).

A step's groups run as before; then, group by group (run/step_groups.py):

    mixed       the fresh samples passed and failed: branch it (loop.branching), train it
    borrowable  all failed, and a passing rollout of the task from an earlier step exists
                (loop.branching.borrow): branch that prefix; it trains if the branches pass
    uniform     otherwise: dropped now (no branch rollouts spent on it), with its reason
                (all_fail, all_pass, same_score, unscored)

While the step has fewer informative groups than loop.groups_per_step, replacements are planned
(at most `max_extra_groups` a step, `oversample` of them up front with the step's own groups),
each for the harness furthest below its share, and run together with the branch wave of the
groups already kept, so a replacement costs no extra wave of its own unless a borrowed prefix
fails. With the difficulty sampler (loop.sampler), a replacement is the unused task of the highest
P(mixed) for its harness (rollout/difficulty.py), not a weighted draw: the step's own uniform
groups were just observed, so the estimate knows what the first picks missed.

With the budget spent, a step tops up (`target_share`, default 0.8): while fewer than
ceil(target_share x loop.groups_per_step) of its groups are informative, it plans that many more
groups, round after round, each on the unused task of the highest posterior P(mixed) for the
harness furthest below its share (the posterior has observed every group of the step so far), until
the step has sampled `rollout_cap` x groups_per_step x n_per_group fresh rollouts (default 3: at
most twice the step's own rollouts more). The groups still train only what they sampled; the record
counts them (`topup_groups`) and every rollout beyond the step's own (`extra_rollouts`).
benchmarks/sampler_calibration.py --simulate measured the defaults (docs/benchmarks.md): every
simulated run >= 80% informative, 90%+ on average, at about 1.3 times the rollouts of a step.

A step that would train nothing once all that is spent tops up (`rescue_groups` more, at most):
one group per harness at a time, on the tasks of the highest P(mixed), while some task has
P(mixed) >= `rescue_min`. Its record counts them (`rescue_groups`). A step that still ends with
no informative group trains nothing, and its record says why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harnessrl.rollout.groups import MIXED, PlannedGroup, group_outcome
from harnessrl.rollout.plan import harness_counts


class DynamicSamplingConfig(BaseModel):
    """`loop.dynamic_sampling` of a run config."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = False
    # groups a step may run beyond loop.groups_per_step (their rollouts are the budget)
    max_extra_groups: int = Field(2, ge=0)
    # of those, planned with the step's own groups (one wave, no waiting for outcomes)
    oversample: int = Field(0, ge=0)
    # then more groups, round by round on the tasks of the highest P(mixed), while fewer than this
    # share of loop.groups_per_step (rounded up) is informative (0: off) ...
    target_share: float = Field(0.8, ge=0.0, le=1.0)
    # ... and the step has sampled fewer than rollout_cap x groups_per_step x n_per_group fresh
    # rollouts, replacements included (1: no top-up)
    rollout_cap: float = Field(3.0, ge=1.0)
    # groups beyond all that, only while the step has no informative group at all ...
    rescue_groups: int = Field(2, ge=0)
    # ... and only on tasks with at least this posterior chance of a mixed group
    rescue_min: float = Field(0.25, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _oversample_within_budget(self) -> "DynamicSamplingConfig":
        if self.oversample > self.max_extra_groups:
            raise ValueError(f"oversample ({self.oversample}) must be at most max_extra_groups "
                             f"({self.max_extra_groups}): oversampled groups are part of the budget")
        return self

    def upfront(self) -> int:
        """Groups planned beyond loop.groups_per_step with the step's own groups."""
        return self.oversample if self.enabled else 0


@dataclass(frozen=True)
class DroppedGroup:
    """A group left out of the update: its id, task, harness, why, and the rollouts it cost."""

    group: str
    task: str
    harness: str
    reason: str
    rollouts: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Triage:
    """A round's groups once their fresh samples ended (see the module docstring)."""

    mixed: list[PlannedGroup]
    borrowable: list[PlannedGroup]
    uniform: list[tuple[PlannedGroup, str]]  # (group, reason)


def triage(groups: Sequence[PlannedGroup], reward: str, can_borrow: Any = None) -> Triage:
    """Sort a round's groups by their fresh samples' outcomes; `can_borrow(plan)` says whether an
    all-fail group has a prefix from elsewhere to branch (None: none has)."""
    out = Triage([], [], [])
    for g in groups:
        outcome = group_outcome(g.rollouts, g.plan.task, reward, fresh_only=True)
        if outcome == MIXED:
            out.mixed.append(g)
        elif outcome == "all_fail" and can_borrow is not None and can_borrow(g.plan):
            out.borrowable.append(g)
        else:
            out.uniform.append((g, outcome))
    return out


def dropped(group: PlannedGroup, reason: str) -> DroppedGroup:
    return DroppedGroup(group.plan.group_id, group.plan.task.id, group.plan.harness, reason, len(group.rollouts))


def replacement_harnesses(weights: dict[str, float], groups_per_step: int, informative: Sequence[str],
                          count: int) -> list[str]:
    """The harnesses of `count` replacement groups: one at a time to the harness furthest below
    its share of loop.groups_per_step (`informative`: the harnesses of the groups kept so far)."""
    deficit = {h: c - sum(x == h for x in informative) for h, c in harness_counts(weights, groups_per_step).items()}
    out = []
    for _ in range(count):
        h = max(deficit, key=lambda k: (deficit[k], weights[k]))
        deficit[h] -= 1
        out.append(h)
    return out


def informative_share(informative: int, groups_per_step: int) -> float:
    """`informative_groups` of a step: informative groups trained per slot of the update's batch
    (loop.groups_per_step), at most 1; a group without contrast and a slot left empty both count
    against it."""
    return min(informative / groups_per_step, 1.0) if groups_per_step > 0 else 0.0


def topup_target(target_share: float, groups_per_step: int) -> int:
    """The informative groups a step tops up to (`target_share` of loop.groups_per_step, rounded
    up; 0: no top-up)."""
    return math.ceil(target_share * groups_per_step - 1e-9) if target_share > 0 else 0


def step_rollout_cap(rollout_cap: float, groups_per_step: int, n_per_group: int) -> int:
    """The fresh rollouts a step may sample before its top-up stops: `rollout_cap` times the
    step's own (loop.groups_per_step x loop.n_per_group)."""
    return int(rollout_cap * groups_per_step * n_per_group + 1e-9)
