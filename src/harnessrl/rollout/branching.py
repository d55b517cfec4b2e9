"""Branching rollouts through an unmodified harness: which recorded decisions to branch at, and the
wave of branch rollouts that re-runs the harness up to them (proxy/replay.py answers the replayed
calls).

After a group's rollouts end, `branch_points` picks (parent rollout, call j) pairs; `width` new
rollouts of the same task and harness, in fresh sandboxes, get the parent's first j served calls
answered again and sample fresh from call j on. They join the parent's group, so the group's prefix
tree holds them as siblings of the parent at that call, and `tree_grpo` credits each decision by
the mean reward of what followed it (docs/training.md, "Branching rollouts").

Placements (`BranchingConfig.placement`; `policy` before: that word names the trained model):
- ``open`` (the default): points where the outcome is still open, chosen before the deciding call
  and without reading any outcome (TreeRL, ARPO: entropy after tool calls): a parent's calls j >=
  min_call that follow a tool result where the policy's next call is uncertain: the mean surprisal
  of call j's sampled tokens over the group's other parents (an estimate of the policy's entropy
  at that call, from the recorded logprobs) is at least ``min_surprisal``; each parent's earliest
  such call, parents in a seeded random order. Every scored group sample may be a parent, passing
  or failing. A settled call (a confident closing "Done.") is no point; a group with no open point
  gets no branch. A parent's own sample at the point is not read: choosing parents by their own
  surprisal there (as ``entropy`` does) selects the unusual, mostly failing samples, and lifted
  tree_grpo's V(root) by +0.026 in benchmarks/tree_credit_sim.py; tree_grpo's credit
  (algo/tree_credit.py) is unbiased for points chosen from what the parent did before them;
- ``entropy``: the decisions the policy was least sure of: the served calls with the highest mean
  surprisal of their sampled tokens (-logprob, an unbiased estimate of the sampling entropy there);
The next two pick parents by their observed outcome: their branches copy an outcome-selected
sample, and no estimator weight corrects for that selection (kept to compare with; docs/training.md,
"Tree credit").
- ``outcome``: the parents with the group's rarer outcome first (the passing rollouts of a group
  that mostly fails, the failing ones of a group that mostly passes), each at its highest-surprisal
  call, then ``entropy`` over the rest. With ``entropy`` alone the branches go where the policy
  was confused, which for a small model is mostly a rollout that failed at its first command: its
  branches fail too and give a tree node no contrast (docs/training.md, "Branching rollouts");
  a rarer-outcome parent's branches are the siblings whose outcomes can differ;
- ``target``: the rarer outcome's parents only (a group with one outcome gets no branch point),
  each at the call where its branches are expected to pass about half the time (Prefix Sampling,
  arXiv 2605.05112: prefixes chosen so that branched groups land near 50%). The model: a branch
  of parent P (outcome o, L served calls) at call j passes with probability p + (o - p) j / L,
  p the group's pass rate (at call 0 the branch is a fresh sample; replaying all of P gives P's
  outcome), so the target call is j* = L (0.5 - p) / (o - p), clamped to [min_call, L - 1]; ties
  go to the least certain call. In a low-pass group that branches a passing rollout about halfway
  back from its end, in a high-pass group a failing one;
- ``random``: calls drawn uniformly (deterministic in the run seed and the group id).
Parents are the group's own rollouts that were scored (never a branch, never one left out); call 0
is never a branch point (a fresh group sample is that branch already), and a parent gets a second
point only when every candidate parent has one.

A prefix from elsewhere (``borrow: true``): a group whose own rollouts all failed has no passing
parent, so its branches replay a recorded passing rollout of the same task and harness from an
earlier step (the latest, rollout/difficulty.py `borrowable`), at half its calls (j* with p = 0).
The replayed calls are context only: the tree builder never trains a replayed completion
(tree/filters.py ``replayed_calls``), and the parent is not in the group, so those tokens carry
no weight at all; the branch's own decisions from its branch call on train as any sample.

`branch_point_outcomes` measures what a policy bought: the share of branch points whose subtree
(the parent, when it is in the group, and its kept branches at that point) holds both outcomes.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from harnessrl.rollout.groups import counted, trained_outcome
from harnessrl.rollout.plan import Branch, GroupPlan
from harnessrl.store.records import CallRecord, Lineage, RolloutRecord, is_scored, rollout_passed, served_calls
from harnessrl.tasks.model import Task

if TYPE_CHECKING:
    from harnessrl.store.run_store import RunStore


class BranchingConfig(BaseModel):
    """`loop.branching` of a run config: branch points per group, branches per point, where they go
    (`placement`; config key loop.branching.policy before, migrated by harnessrl.config.migrate)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    points: int = Field(0, ge=0)  # branch points per group (0: no branching)
    width: int = Field(2, ge=1)  # branch rollouts per point
    placement: Literal["open", "entropy", "outcome", "target", "random"] = "open"
    min_call: int = Field(1, ge=1)  # the earliest branch call (1: replay at least one call)
    # open: a call is an open point when its sampled tokens' mean surprisal (nats) is at least this
    min_surprisal: float = Field(0.1, ge=0)
    # an all-fail group branches a passing rollout of its task and harness from an earlier step
    borrow: bool = False

    @property
    def enabled(self) -> bool:
        """Whether a step branches (points > 0): the one place that decides it. What depends on
        it reads this or the properties below; `branch_plans` of a step that does not branch is []."""
        return self.points > 0

    @property
    def borrows(self) -> bool:
        """An all-fail group branches a prefix from an earlier step: `borrow` on and the step branching."""
        return self.enabled and self.borrow

    @property
    def rollouts_per_group(self) -> int:
        """The branch rollouts a group may add: points x width (0 when the step does not branch)."""
        return self.points * self.width if self.enabled else 0

    @property
    def step_placement(self) -> str | None:
        """The placement a branching step records (None when the step does not branch)."""
        return self.placement if self.enabled else None


@dataclass(frozen=True)
class BranchPoint:
    parent: str
    branch_call: int  # the branch replays calls 0..branch_call-1 of the parent and samples this one fresh
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


def target_call(n_calls: int, group_rate: float, parent_passed: bool) -> float:
    """The call j* at which a branch of the parent is expected to pass half the time (the
    ``target`` policy's model, module docstring): L (0.5 - p) / (o - p), in calls."""
    o = 1.0 if parent_passed else 0.0
    if o == group_rate:
        return float(n_calls)
    return n_calls * min(max((0.5 - group_rate) / (o - group_rate), 0.0), 1.0)


def _candidates(r: RolloutRecord, own: Sequence[CallRecord], cfg: BranchingConfig, rng: random.Random,
                aim: float | None) -> list[tuple[tuple[float, float], BranchPoint]]:
    """(sort key, point) for each call of one parent that may be a branch point: by distance to
    the target call `aim` (target policy), then by surprisal (highest first); random: by a draw."""
    out = []
    for j in range(cfg.min_call, len(own)):
        score = rng.random() if cfg.placement == "random" else surprisal(own[j])
        near = -abs(j - aim) if aim is not None else 0.0
        out.append(((-near, -score), BranchPoint(r.rollout_id, j, score)))
    return out


def branch_points(rollouts: Sequence[RolloutRecord], calls: Sequence[CallRecord], cfg: BranchingConfig,
                  seed: int = 0, task: Task | None = None) -> list[BranchPoint]:
    """Up to `cfg.points` branch points of one group (see the module docstring); `task` holds the
    pass rule the `outcome` and `target` policies read (None: reward >= 1)."""
    if not cfg.enabled:
        return []
    by_rollout: dict[str, list[CallRecord]] = {}
    for c in calls:
        by_rollout.setdefault(c.rollout_id, []).append(c)
    rng = random.Random(seed * 1_000_003 + zlib.crc32(rollouts[0].group_id.encode()) if rollouts else seed)
    parents = [r for r in rollouts if r.lineage is None and is_scored(r.status, r.reward)]
    if cfg.placement == "open":
        return _chosen(open_points([(r.rollout_id, served_calls(by_rollout.get(r.rollout_id, []))) for r in parents],
                                   cfg, rng), cfg.points)
    first = rarer_outcome(parents, task) if cfg.placement in ("outcome", "target") else set()
    rate = 0.0
    if cfg.placement == "target":
        rate = sum(rollout_passed(r, task) for r in parents) / max(len(parents), 1)
        parents = [r for r in parents if r.rollout_id in first]
    candidates: list[tuple[tuple[float, ...], BranchPoint]] = []
    for r in parents:
        own = served_calls(by_rollout.get(r.rollout_id, []))
        aim = target_call(len(own), rate, rollout_passed(r, task)) if cfg.placement == "target" else None
        candidates += [((float(r.rollout_id not in first), *key), p) for key, p in _candidates(r, own, cfg, rng, aim)]
    candidates.sort(key=lambda kp: (*kp[0], kp[1].parent, kp[1].branch_call))
    return _chosen([p for _, p in candidates], cfg.points)


def after_tool_result(before: CallRecord, call: CallRecord) -> bool:
    """Whether `call`'s prompt carries harness text (a tool result, a user turn) after everything
    `before` sent and sampled: the policy decides again on something new."""
    return len(call.prompt_ids) > len(before.prompt_ids) + len(before.sampled_ids)


def open_points(parents: Sequence[tuple[str, Sequence[CallRecord]]], cfg: BranchingConfig,
                rng: random.Random) -> list[BranchPoint]:
    """The ``open`` policy's points, best first (module docstring). Per parent (its served calls in
    order), the calls j >= min_call that follow a tool result where the group's next call is
    uncertain: the mean surprisal of call j over the *other* parents that made a call j is at least
    min_surprisal; the earliest first (the first uncertain decision after new information, before
    the deciding call). Parents in a seeded random order. So whether and where a parent branches
    depends on its own calls before the point only, never on what it sampled from there on or on
    its outcome: its continuation stays an unbiased sibling of its branches (algo/tree_credit.py)."""
    by_call: dict[int, list[tuple[str, float]]] = {}
    for parent, own in parents:
        for j, c in enumerate(own):
            by_call.setdefault(j, []).append((parent, surprisal(c)))

    def uncertainty(parent: str, j: int) -> float | None:
        others = [u for p, u in by_call.get(j, []) if p != parent]
        return sum(others) / len(others) if others else None

    order = {parent: rng.random() for parent, _ in parents}
    ranked: list[tuple[int, float, str, int]] = []
    for parent, own in parents:
        j_open = [j for j in range(cfg.min_call, len(own)) if after_tool_result(own[j - 1], own[j])
                  and (u := uncertainty(parent, j)) is not None and u >= cfg.min_surprisal]
        ranked += [(k, order[parent], parent, j) for k, j in enumerate(j_open)]
    ranked.sort()
    return [BranchPoint(parent, j, float(uncertainty(parent, j) or 0.0)) for _, _, parent, j in ranked]


def _chosen(ordered: Sequence[BranchPoint], points: int) -> list[BranchPoint]:
    """The first point of each parent in order, then more points where parents ran out."""
    chosen: list[BranchPoint] = []
    used: set[str] = set()
    for p in ordered:
        if len(chosen) < points and p.parent not in used:
            chosen.append(p)
            used.add(p.parent)
    for p in ordered:
        if len(chosen) < points and p not in chosen:
            chosen.append(p)
    return chosen


def borrowed_points(parent: str, calls: Sequence[CallRecord], cfg: BranchingConfig) -> list[BranchPoint]:
    """Branch points on a passing rollout of an earlier step (an all-fail group's prefix from
    elsewhere): the calls nearest half its served calls, the least certain first."""
    own = served_calls(calls)
    rec = RolloutRecord(parent, "", "", "", "ok", 1.0)
    ranked = sorted(_candidates(rec, own, cfg, random.Random(0), target_call(len(own), 0.0, True)),
                    key=lambda kp: (*kp[0], kp[1].branch_call))
    return _chosen([p for _, p in ranked], cfg.points)


def all_failed(rollouts: Sequence[RolloutRecord], task: Task | None) -> bool:
    """Whether the group's own scored samples (branches aside) all failed (and there is one)."""
    fresh = counted(rollouts, fresh_only=True)
    return bool(fresh) and not any(rollout_passed(r, task) for r in fresh)


def branch_plan(plan: GroupPlan, rollouts: Sequence[RolloutRecord], calls: Sequence[CallRecord],
                cfg: BranchingConfig, seed: int = 0,
                borrowed: tuple[str, Sequence[CallRecord]] | None = None) -> GroupPlan | None:
    """The wave of branches of one recorded group (None when it has no branch point). `borrowed`:
    (rollout id, its calls) of a passing rollout of the task from an earlier step, branched
    instead when the group's own samples all failed and `cfg.borrow` is on."""
    if cfg.borrows and borrowed is not None and all_failed(rollouts, plan.task):
        points = borrowed_points(borrowed[0], borrowed[1], cfg)
    else:
        points = branch_points(rollouts, calls, cfg, seed, plan.task)
    if not points:
        return None
    branches = tuple(Branch(p.parent, p.branch_call) for p in points for _ in range(cfg.width))
    first = 1 + max((r.sample_idx for r in rollouts), default=plan.n - 1)
    return GroupPlan(plan.group_id, plan.task, plan.harness, len(branches), plan.split, plan.step,
                     branches=branches, first=first)


Borrow = Callable[[GroupPlan], "str | None"]  # a plan -> a passing rollout of its task from an earlier step


def branch_plans(store: RunStore, plans: Sequence[GroupPlan], cfg: BranchingConfig, seed: int = 0,
                 borrow: Borrow | None = None) -> list[GroupPlan]:
    """The branch waves of recorded groups, read from the run store; `borrow` names the prefix
    from elsewhere of a plan (used when `cfg.borrow` is on and the group's samples all failed); []
    when the step does not branch."""
    out: list[GroupPlan] = []
    if not cfg.enabled:
        return out
    for plan in plans:
        rollouts = store.list_rollouts(group_id=plan.group_id)
        calls = store.list_calls([r.rollout_id for r in rollouts], as_arrays=True) if rollouts else []
        borrowed = None
        if cfg.borrows and borrow is not None and all_failed(rollouts, plan.task):
            parent = borrow(plan)
            if parent:
                borrowed = (parent, store.list_calls([parent], as_arrays=True))
        wave = branch_plan(plan, rollouts, calls, cfg, seed, borrowed)
        if wave is not None:
            out.append(wave)
    return out


def branch_lineage(store: RunStore, rollout_id: str, lineage: Lineage) -> Lineage:
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


@dataclass(frozen=True)
class PointOutcomes:
    """One branch point (parent, call) of a group: the outcomes of its kept branches, and its
    parent's when the parent is in the group and kept (None otherwise: borrowed from an earlier
    step, or left out of the update)."""

    parent: str
    call: int
    branches: tuple[float, ...]
    parent_outcome: float | None
    borrowed: bool  # the parent is not in the group

    @property
    def outcomes(self) -> tuple[float, ...]:
        """The subtree's outcomes: the kept branches and the kept parent."""
        return self.branches if self.parent_outcome is None else (*self.branches, self.parent_outcome)

    @property
    def mixed(self) -> bool:
        return len(set(self.outcomes)) > 1


def point_outcomes(rollouts: Sequence[RolloutRecord], task: Task | None, reward: str = "pass") -> list[PointOutcomes]:
    """The branch points that ran in one group, in the order their first branch appears."""
    members = {r.rollout_id: r for r in rollouts}
    kept = {r.rollout_id for r in counted(rollouts)}
    subtrees: dict[tuple[str, int], list[float]] = {}
    for r in rollouts:
        if r.lineage is not None:
            outcomes = subtrees.setdefault((r.lineage.parent, r.lineage.branch_call), [])
            if r.rollout_id in kept:
                outcomes.append(trained_outcome(r, task, reward))
    points = []
    for (parent, call), outcomes in subtrees.items():
        own = members.get(parent)
        mine = trained_outcome(own, task, reward) if own is not None and own.rollout_id in kept else None
        points.append(PointOutcomes(parent, call, tuple(outcomes), mine, own is None))
    return points


def branch_point_outcomes(rollouts: Sequence[RolloutRecord], task: Task | None, reward: str = "pass") -> dict[str, int]:
    """Per group: branch points (parent, call) that ran, how many have a subtree with mixed
    outcomes (the parent, when it is in the group, and its kept branches at that point), and the
    same for the points borrowed from an earlier step's rollout (parent not in the group)."""
    points = point_outcomes(rollouts, task, reward)
    return {"points": len(points), "mixed": sum(p.mixed for p in points),
            "borrowed_points": sum(p.borrowed for p in points),
            "borrowed_mixed": sum(p.mixed and p.borrowed for p in points)}


def sampling_budget(groups: Sequence[tuple[Sequence[RolloutRecord], Sequence[CallRecord]]],
                    nominal: float) -> dict[str, float]:
    """What a step's groups (rollouts, calls) cost in sampling: the tokens the engine sampled (served
    calls, replayed answers left out) and the replayed ones (answered from a parent's record: no
    sampling), and the rollouts run per group (fresh and branches) against the nominal budget per
    group (n_per_group + points x width)."""
    sampled = replayed = 0
    for _, calls in groups:
        by_rollout: dict[str, list[CallRecord]] = {}
        for c in calls:
            by_rollout.setdefault(c.rollout_id, []).append(c)
        for own in by_rollout.values():
            for c in served_calls(own):
                if "of" in ((c.meta or {}).get("replay") or {}):
                    replayed += len(c.sampled_ids)
                else:
                    sampled += len(c.sampled_ids)
    n = [len(rollouts) for rollouts, _ in groups]
    return {"tokens_sampled": float(sampled), "tokens_replayed": float(replayed),
            "rollouts_per_group": round(sum(n) / len(n), 4) if n else 0.0,
            "nominal_rollouts_per_group": float(nominal)}
