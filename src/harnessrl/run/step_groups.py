"""A training step's groups, from plan to what trains: the sampler's picks, the step's groups,
their branch waves and (loop.dynamic_sampling) the replacements of groups without contrast.

    plans   = step_plans(step)                     # loop.sampler: uniform, or tasks near p = 0.5
    (the loop runs them, or they ran ahead)
    rounds: the round's groups are read back and observed by the tracker (rollout/difficulty.py);
            mixed ones (and all-fail ones with a borrowed prefix) branch, uniform ones are dropped;
            replacements for the missing informative groups run with the branch wave
    top-up: the budget spent and fewer than target_share of the batch informative, more groups on the
            tasks of the highest P(mixed), round by round, within rollout_cap
    rescue: a step left with no informative group tops up from the tasks of the highest P(mixed)
    -> Collected(groups that train, every group sampled, the step's SamplingStats)
    step_rollout_stats(cfg, sampled)               # the step's RolloutStats: branches, sampling cost

The step's branching (loop.branching: its branch waves, borrowed prefixes, placement, summary and
budget) is read here alone in run/; the BranchingConfig goes whole to rollout/branching.py.

Without dynamic sampling every group branches and trains, as before; the stats still say how many
had contrast (rollout/informative.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harnessrl.rollout.branching import branch_plans, branch_point_outcomes, branching_summary, sampling_budget
from harnessrl.rollout.difficulty import DifficultyTracker, Observation, picks_summary, planned_from, task_family
from harnessrl.rollout.groups import MIXED, PlannedGroup, counted, group_outcome, read_groups
from harnessrl.rollout.informative import (DroppedGroup, dropped, informative_share, replacement_harnesses,
                                           step_rollout_cap, topup_target, triage)
from harnessrl.store.records import rollout_passed
from harnessrl.rollout.pass_at_k import harness_summary
from harnessrl.rollout.plan import GroupPlan, TaskWeight, family_balanced, plan_more, plan_step, weight_group
from harnessrl.report.record import RolloutStats, SamplingStats

if TYPE_CHECKING:
    from harnessrl.config import RunConfig
    from harnessrl.store.run_store import RunStore
    from harnessrl.tasks.model import Task

Wave = Callable[[Sequence[GroupPlan], str], None]  # run plans; the phase key they are timed under


@dataclass
class Collected:
    groups: list[PlannedGroup]  # what trains (dynamic sampling: the informative groups only)
    sampled: list[PlannedGroup]  # every group the step ran, as recorded at the end
    stats: SamplingStats
    dropped: list[DroppedGroup] = field(default_factory=list)


def task_weight(cfg: RunConfig, tracker: DifficultyTracker, step: int, tasks: Sequence[Task]) -> TaskWeight | None:
    """The sampler's weight of a (task, harness) when step `step` is planned (None: uniform), each
    family's total rescaled to its `family_weights` share when that is set."""
    sampler, n = cfg.loop.sampler, cfg.loop.n_per_group
    weight: TaskWeight | None = None
    if sampler.type == "difficulty":
        def weight(t: Task, h: str) -> float:
            return tracker.weight(t.id, task_family(t), h, step, n)
    if not sampler.family_weights:
        return weight
    return family_balanced(weight or (lambda t, h: 1.0), tasks, sampler.family_weights,
                           weight_group(sampler.family_weights))


def mixed_chance(tracker: DifficultyTracker, step: int, n: int, least: float = 0.0) -> TaskWeight:
    """A (task, harness)'s posterior chance of a mixed group of n, 0 below `least` (best picks)."""
    def chance(t: Task, h: str) -> float:
        p = tracker.p_mixed(t.id, task_family(t), h, step, n)
        return p if p >= least and p > 0 else 0.0
    return chance


def step_plans(cfg: RunConfig, attempt: int, train_tasks: list[Task], step: int, tracker: DifficultyTracker) -> list[GroupPlan]:
    """The step's own groups (and loop.dynamic_sampling.oversample more), drawn by loop.sampler
    from the observations of the steps that had ended when its rollouts could start."""
    seen = tracker.until(planned_from(step, cfg.loop.max_policy_lag))
    n = cfg.loop.groups_per_step + cfg.loop.dynamic_sampling.upfront()
    return plan_step(step, attempt, train_tasks, {h.name: h.weight for h in cfg.harnesses}, n,
                     cfg.loop.n_per_group, cfg.loop.seed, task_weight(cfg, seen, step, train_tasks))


def pick_log(plans: Sequence[GroupPlan], tracker: DifficultyTracker, step: int,
             drawn_by: TaskWeight | None = None) -> list[dict[str, Any]]:
    """The sampler's picks as the record keeps them: group, task, harness, estimated p, and the
    weight the draw used (`drawn_by`: family-balanced, or P(mixed) for a best pick; else the
    tracker's weight)."""
    out = []
    for p in plans:
        fam = task_family(p.task)
        weight = drawn_by(p.task, p.harness) if drawn_by else tracker.weight(p.task.id, fam, p.harness, step, p.n)
        out.append({"group": p.group_id, "task": p.task.id, "harness": p.harness,
                    "p": round(tracker.pass_rate(p.task.id, fam, p.harness, step), 4),
                    "weight": round(weight, 4), "n": p.n,
                    "p_mixed": round(tracker.p_mixed(p.task.id, fam, p.harness, step, p.n), 4)})
    return out


def fresh_passes(g: PlannedGroup) -> tuple[int, int]:
    """(passes, scored) of a group's own fresh samples (its branches left out)."""
    fresh = counted(g.rollouts, fresh_only=True)
    return sum(rollout_passed(r, g.plan.task) for r in fresh), len(fresh)


def observe(tracker: DifficultyTracker, step: int, groups: Sequence[PlannedGroup]) -> None:
    """Add each group's fresh samples to the tracker, with its longest passing rollout (a prefix an
    all-fail group of a later step may borrow)."""
    for g in groups:
        fresh = counted(g.rollouts, fresh_only=True)
        passing = sorted((r for r in fresh if rollout_passed(r, g.plan.task) and r.call_count >= 2),
                         key=lambda r: (-r.call_count, r.sample_idx))
        tracker.observe(Observation(step, g.plan.task.id, task_family(g.plan.task), g.plan.harness,
                                    *fresh_passes(g), passing[0].rollout_id if passing else "",
                                    group=g.plan.group_id))


def observe_eval(tracker: DifficultyTracker, step: int, groups: Sequence[PlannedGroup]) -> None:
    """Add held-out eval groups to the tracker: other tasks of the training families, so they move
    the family rates and the fitted concentration (rollout/difficulty.py), never a borrowed prefix;
    an eval of the step observed before (it ran again after a crash) is replaced."""
    tracker.forget_eval(step)
    for g in groups:
        passes, n = fresh_passes(g)
        if n:
            tracker.observe(Observation(step, g.plan.task.id, task_family(g.plan.task), g.plan.harness, passes, n,
                                        split="eval", group=g.plan.group_id))


def collect_groups(cfg: RunConfig, store: RunStore, tracker: DifficultyTracker, attempt: int, train_tasks: list[Task],
                   plans: Sequence[GroupPlan], wave: Wave) -> Collected:
    """The step's groups once its planned groups' own samples are recorded (see the module
    docstring); `wave(plans, key)` runs more rollouts (branches and replacements)."""
    loop, reward = cfg.loop, cfg.algorithm.reward
    ds, br = loop.dynamic_sampling, loop.branching
    step = plans[0].step
    weights = {h.name: h.weight for h in cfg.harnesses}
    seen = tracker.until(planned_from(step, loop.max_policy_lag))
    picks = pick_log(plans, seen, step, task_weight(cfg, seen, step, train_tasks))
    borrow = _borrow(tracker, step) if br.borrows else None
    budget = ds.max_extra_groups - ds.upfront() if ds.enabled else 0
    rescue = ds.rescue_groups if ds.enabled else 0
    rescued = 0
    target = topup_target(ds.target_share, loop.groups_per_step) if ds.enabled else 0
    cap = step_rollout_cap(ds.rollout_cap, loop.groups_per_step, loop.n_per_group)
    topped = 0
    best = loop.sampler.type == "difficulty"  # replacements: the highest P(mixed), not a draw
    sampled: list[GroupPlan] = list(plans)
    kept: list[PlannedGroup] = []
    lost: list[PlannedGroup] = []
    dropped_log: list[DroppedGroup] = []
    pending: list[GroupPlan] = list(plans)

    def replacements(need: int) -> list[GroupPlan]:
        nonlocal budget
        count = min(need, budget) if ds.enabled else 0
        if count <= 0:
            return []
        harnesses = replacement_harnesses(weights, loop.groups_per_step, [g.plan.harness for g in kept], count)
        weight = mixed_chance(tracker, step, loop.n_per_group) if best else task_weight(cfg, tracker, step, train_tasks)
        more = plan_more(step, attempt, train_tasks, harnesses, len(sampled), loop.n_per_group, loop.seed,
                         weight, exclude=[p.task.id for p in sampled], best=best)
        budget -= len(more)
        sampled.extend(more)
        picks.extend(pick_log(more, tracker, step, weight))
        return more

    def topups(need: int) -> list[GroupPlan]:
        """The budget spent and fewer than `target` groups informative: `need` more (at most the
        rollout cap's room) on the unused tasks of the highest P(mixed), as the step's groups so far
        left the posterior."""
        nonlocal topped
        count = min(need, (cap - sum(p.n for p in sampled)) // loop.n_per_group)
        if count <= 0:
            return []
        harnesses = replacement_harnesses(weights, loop.groups_per_step, [g.plan.harness for g in kept], count)
        chance = mixed_chance(tracker, step, loop.n_per_group)
        more = plan_more(step, attempt, train_tasks, harnesses, len(sampled), loop.n_per_group, loop.seed,
                         chance, exclude=[p.task.id for p in sampled], best=True)
        topped += len(more)
        sampled.extend(more)
        picks.extend(pick_log(more, tracker, step, chance))
        return more

    def rescues() -> list[GroupPlan]:
        """Nothing informative and the budget spent: groups on the tasks most likely mixed."""
        nonlocal rescue, rescued
        if kept or rescue <= 0:
            return []
        harnesses = replacement_harnesses(weights, loop.groups_per_step, [], min(rescue, len(weights)))
        chance = mixed_chance(tracker, step, loop.n_per_group, ds.rescue_min)
        more = plan_more(step, attempt, train_tasks, harnesses, len(sampled), loop.n_per_group, loop.seed,
                         chance, exclude=[p.task.id for p in sampled], best=True)
        rescue -= len(more) if more else rescue  # no task left in reach: stop asking
        rescued += len(more)
        sampled.extend(more)
        picks.extend(pick_log(more, tracker, step, chance))
        return more

    while pending:
        groups = read_groups(store, pending)
        observe(tracker, step, groups)
        if ds.enabled:
            triaged = triage(groups, reward, borrow)
            branchable = triaged.mixed + triaged.borrowable
            for g, why in triaged.uniform:
                lost.append(g)
                dropped_log.append(dropped(g, why))
            new = replacements(loop.groups_per_step - len(kept) - len(triaged.mixed))
            new += topups(target - len(kept) - len(triaged.mixed) - len(new))
        else:
            branchable, new = list(groups), []
        waves = branch_plans(store, [g.plan for g in branchable], br, loop.seed, borrow)
        if waves or new:
            wave([*waves, *new], "rollout" if new else "branch")
        for g in read_groups(store, [g.plan for g in branchable]) if waves else branchable:
            outcome = group_outcome(g.rollouts, g.plan.task, reward)
            if ds.enabled and outcome != MIXED:  # an all-fail group whose borrowed prefix did not help
                lost.append(g)
                dropped_log.append(dropped(g, f"{outcome}_borrowed"))
            else:
                kept.append(g)
        pending = new
        if not pending and len(kept) < loop.groups_per_step:
            pending = replacements(loop.groups_per_step - len(kept)) or topups(target - len(kept)) or rescues()
            if pending:
                wave(pending, "rollout")
    stats = sampling_stats(kept + lost, kept, dropped_log, picks, loop.groups_per_step, reward,
                           br.step_placement)
    stats.rescue_groups = float(rescued) if ds.enabled else None
    stats.topup_groups = float(topped) if ds.enabled else None
    stats.extra_rollouts = float(sum(p.n for p in sampled[loop.groups_per_step:]))
    return Collected(kept, kept + lost, stats, dropped_log)


def step_rollout_stats(cfg: RunConfig, groups: Sequence[PlannedGroup]) -> RolloutStats:
    """The step's RolloutStats (report/record.py) from every group it sampled: per harness, the
    branches' summary when the step branches, and what the groups cost in sampling against the
    nominal rollouts per group (n_per_group + the branch rollouts loop.branching adds)."""
    br = cfg.loop.branching
    branching = branching_summary([r for g in groups for r in g.rollouts]) if br.enabled else None
    budget = sampling_budget([(g.rollouts, g.calls) for g in groups],
                             cfg.loop.n_per_group + br.rollouts_per_group)
    return RolloutStats(**harness_summary(groups), branching=branching, budget=budget)


def _borrow(tracker: DifficultyTracker, step: int) -> Callable[[GroupPlan], str | None]:
    def borrow(plan: GroupPlan) -> str | None:
        found = tracker.borrowable(plan.task.id, plan.harness, before=step)
        return found.rollout_id if found else None
    return borrow


def sampling_stats(sampled: Sequence[PlannedGroup], trained: Sequence[PlannedGroup], dropped_log: list[DroppedGroup],
                   picks: list[dict[str, Any]], groups_per_step: int, reward: str,
                   branch_policy: str | None) -> SamplingStats:
    """The step's SamplingStats from its final groups (report/record.py)."""
    mixed = {g.plan.group_id for g in sampled if group_outcome(g.rollouts, g.plan.task, reward) == MIXED}
    fresh = {g.plan.group_id: fresh_passes(g) for g in sampled}
    for pick in picks:  # what the pick's own samples did, next to the chance it was given (report: Brier)
        if pick["group"] in fresh:
            passes, n = fresh[pick["group"]]
            pick["mixed"] = 0 < passes < n
    informative_trained = sum(g.plan.group_id in mixed for g in trained)
    points = Counter[str]()
    for g in sampled:
        points.update(branch_point_outcomes(g.rollouts, g.plan.task, reward))
    n_points = points["points"]
    return SamplingStats(
        informative_groups=round(informative_share(informative_trained, groups_per_step), 4),
        sampled_informative=round(len(mixed) / len(sampled), 4) if sampled else 0.0,
        groups_sampled=float(len(sampled)), extra_groups=float(max(len(sampled) - groups_per_step, 0)),
        wasted_rollouts=float(sum(len(g.rollouts) for g in sampled if g.plan.group_id not in mixed)),
        rollouts_sampled=float(sum(len(g.rollouts) for g in sampled)),
        pick_pass_rate=round(picks_summary(picks), 4),
        dropped_groups={k: float(v) for k, v in sorted(Counter(d.reason for d in dropped_log).items())},
        branch_points=float(n_points) if branch_policy else None,
        branch_mixed=round(points["mixed"] / n_points, 4) if branch_policy and n_points else None,
        borrowed_points=float(points["borrowed_points"]) if branch_policy else None,
        borrowed_mixed=(round(points["borrowed_mixed"] / points["borrowed_points"], 4)
                        if branch_policy and points["borrowed_points"] else None),
        branch_policy=branch_policy, sampler_picks=picks, dropped_log=[d.to_json() for d in dropped_log])


def sampling_text(s: SamplingStats | None, groups_trained: float | None) -> str:
    """The step line's part about informative groups ("" without stats); a step that trained no
    group says so, and why."""
    if s is None:
        return ""
    text = (f"informative groups {s.informative_groups:.0%} of the batch, {s.sampled_informative:.0%} of "
            f"{s.groups_sampled:.0f} sampled")
    if s.dropped_groups:
        text += " (dropped " + ", ".join(f"{k} {v:.0f}" for k, v in s.dropped_groups.items()) + ")"
    if s.wasted_rollouts:
        text += f", {s.wasted_rollouts:.0f} rollouts without contrast"
    if s.branch_mixed is not None:
        text += f", branch points with mixed outcomes {s.branch_mixed:.0%}"
    if s.topup_groups:
        text += f", {s.topup_groups:.0f} top-up groups"
    if s.rescue_groups:
        text += f", {s.rescue_groups:.0f} rescue groups (none informative before)"
    if s.extra_rollouts:
        text += f", {s.extra_rollouts:.0f} extra rollouts"
    if not groups_trained:
        text += "; nothing trained: no group had mixed outcomes"
    return text
