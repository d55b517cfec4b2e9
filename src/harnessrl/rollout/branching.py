"""Branching rollouts through an unmodified harness: which recorded decisions to branch at, and the
wave of branch rollouts that re-runs the harness up to them (proxy/replay.py answers the replayed
calls).

After a group's rollouts end, `branch_points` picks (parent rollout, call j) pairs; `width` new
rollouts of the same task and harness, in fresh sandboxes, get the parent's first j served calls
answered again and sample fresh from call j on. They join the parent's group, so the group's prefix
tree holds them as siblings of the parent at that call, and `tree_grpo` credits each decision by
the mean reward of what followed it (docs/training.md, "Branching rollouts").

Policies (`BranchingConfig.policy`):
- ``entropy``: the decisions the policy was least sure of: the served calls with the highest mean
  surprisal of their sampled tokens (-logprob, an unbiased estimate of the sampling entropy there);
- ``outcome``: the parents with the group's rarer outcome first (the passing rollouts of a group
  that mostly fails, the failing ones of a group that mostly passes), each at its highest-surprisal
  call, then ``entropy`` over the rest. With ``entropy`` alone the branches go where the policy
  was confused, which for a small model is mostly a rollout that failed at its first command: its
  branches fail too and give a tree node no contrast (docs/training.md, "Branching rollouts");
  a rarer-outcome parent's branches are the siblings whose outcomes can differ;
- ``random``: calls drawn uniformly (deterministic in the run seed and the group id).
Parents are the group's own rollouts that were scored (never a branch, never one left out); call 0
is never a branch point (a fresh group sample is that branch already), and a parent gets a second
point only when every candidate parent has one.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harnessrl.rollout.pass_at_k import rollout_passed
from harnessrl.rollout.plan import Branch, GroupPlan
from harnessrl.store.records import CallRecord, Lineage, RolloutRecord, is_scored, served_calls
from harnessrl.tasks.model import Task


class BranchingConfig(BaseModel):
    """`loop.branching` of a run config: branch points per group, branches per point, policy."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    points: int = Field(0, ge=0)  # branch points per group (0: no branching)
    width: int = Field(2, ge=1)  # branch rollouts per point
    policy: Literal["entropy", "outcome", "random"] = "entropy"
    min_call: int = Field(1, ge=1)  # the earliest branch call (1: replay at least one call)

    @property
    def enabled(self) -> bool:
        return self.points > 0

    def rollouts_per_group(self) -> int:
        """Branch rollouts a group adds at most (its sampled-rollout budget grows by this)."""
        return self.points * self.width


@dataclass(frozen=True)
class BranchPoint:
    parent: str
    call: int  # the branch replays calls 0..call-1 of the parent and samples call `call` fresh
    score: float  # the policy's score (mean surprisal for entropy)


def surprisal(call: CallRecord) -> float:
    """Mean -logprob of a call's sampled tokens."""
    lp = np.asarray(call.logprobs, dtype=np.float64)
    return float(-lp.mean()) if len(lp) else 0.0


def rarer_outcome(rollouts: Sequence[RolloutRecord], task: Task | None) -> set[str]:
    """The ids of the rollouts with the group's rarer outcome (pass or fail; on a tie, the passing
    ones); empty when every rollout had the same outcome."""
    outcome = {r.rollout_id: rollout_passed(r, task) for r in rollouts}
    passes = sum(outcome.values())
    if passes in (0, len(outcome)):
        return set()
    rare = 2 * passes <= len(outcome)  # True: passing is the rarer outcome
    return {rid for rid, ok in outcome.items() if ok == rare}


def branch_points(rollouts: Sequence[RolloutRecord], calls: Sequence[CallRecord], cfg: BranchingConfig,
                  seed: int = 0, task: Task | None = None) -> list[BranchPoint]:
    """Up to `cfg.points` branch points of one group (see the module docstring); `task` holds the
    pass rule the `outcome` policy reads (None: reward >= 1)."""
    if not cfg.enabled:
        return []
    by_rollout: dict[str, list[CallRecord]] = {}
    for c in calls:
        by_rollout.setdefault(c.rollout_id, []).append(c)
    rng = random.Random(seed * 1_000_003 + zlib.crc32(rollouts[0].group_id.encode()) if rollouts else seed)
    parents = [r for r in rollouts if r.lineage is None and is_scored(r.status, r.reward)]
    first = rarer_outcome(parents, task) if cfg.policy == "outcome" else set()
    candidates: list[BranchPoint] = []
    for r in parents:
        own = served_calls(by_rollout.get(r.rollout_id, []))
        for j in range(cfg.min_call, len(own)):
            score = rng.random() if cfg.policy == "random" else surprisal(own[j])
            candidates.append(BranchPoint(r.rollout_id, j, score))
    candidates.sort(key=lambda p: (p.parent not in first, -p.score, p.parent, p.call))
    chosen: list[BranchPoint] = []
    used: set[str] = set()
    for p in candidates:  # one point per parent first, the best of each
        if len(chosen) < cfg.points and p.parent not in used:
            chosen.append(p)
            used.add(p.parent)
    for p in candidates:  # then more points where parents ran out
        if len(chosen) < cfg.points and p not in chosen:
            chosen.append(p)
    return chosen


def branch_plan(plan: GroupPlan, rollouts: Sequence[RolloutRecord], calls: Sequence[CallRecord],
                cfg: BranchingConfig, seed: int = 0) -> GroupPlan | None:
    """The wave of branches of one recorded group (None when it has no branch point)."""
    points = branch_points(rollouts, calls, cfg, seed, plan.task)
    if not points:
        return None
    branches = tuple(Branch(p.parent, p.call) for p in points for _ in range(cfg.width))
    first = 1 + max((r.sample_idx for r in rollouts), default=plan.n - 1)
    return GroupPlan(plan.group_id, plan.task, plan.harness, len(branches), plan.split, plan.step,
                     branches=branches, first=first)


def branch_plans(store: Any, plans: Sequence[GroupPlan], cfg: BranchingConfig, seed: int = 0) -> list[GroupPlan]:
    """The branch waves of recorded groups, read from the run store."""
    out = []
    for plan in plans:
        rollouts = store.list_rollouts(group_id=plan.group_id)
        calls = store.list_calls([r.rollout_id for r in rollouts], as_arrays=True) if rollouts else []
        wave = branch_plan(plan, rollouts, calls, cfg, seed)
        if wave is not None:
            out.append(wave)
    return out


def branch_lineage(store: Any, rollout_id: str, lineage: Lineage) -> Lineage:
    """A finished branch's lineage from what its calls record (`meta["replay"]`, proxy/replay.py)."""
    replays = [c["meta"].get("replay") for c in store.list_call_summaries([rollout_id])]
    hits = [r for r in replays if isinstance(r, dict) and "of" in r]
    diverged = ("prompt" if any(isinstance(r, dict) and r.get("diverged") for r in replays)
                else "ended" if len(hits) < lineage.branch_call else "")
    return Lineage(lineage.parent, lineage.branch_call, replayed=len(hits),
                   exact=sum(r.get("match") == "exact" for r in hits), diverged=diverged)


def branching_summary(rollouts: Sequence[RolloutRecord]) -> dict[str, float]:
    """Branches, how many diverged (by reason), and the share of replayed calls matched exactly."""
    branches = [r.lineage for r in rollouts if r.lineage is not None]
    replayed = sum(b.replayed for b in branches)
    return {"branches": len(branches), "diverged": sum(bool(b.diverged) for b in branches),
            "diverged_prompt": sum(b.diverged == "prompt" for b in branches),
            "diverged_ended": sum(b.diverged == "ended" for b in branches),
            "replayed_calls": replayed,
            "exact_share": round(sum(b.exact for b in branches) / replayed, 4) if replayed else 0.0}
