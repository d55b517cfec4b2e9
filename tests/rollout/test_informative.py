"""Informative groups without a run: the difficulty tracker's estimates and persistence, weighted
task picks, the triage of a round's groups, the `target` branching policy's parents and calls,
borrowed prefixes for all-fail groups (their replayed calls carry zero weight), and the share of
branch points whose subtree has mixed outcomes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from harnessrl.algo.estimator import step_advantages
from harnessrl.rollout.branching import (BranchingConfig, branch_plan, branch_plans, branch_point_outcomes,
                                         branch_points, target_call)
from harnessrl.rollout.difficulty import DifficultyTracker, Observation, SamplerConfig, planned_from
from harnessrl.rollout.groups import PlannedGroup, group_outcome
from harnessrl.rollout.informative import DynamicSamplingConfig, replacement_harnesses, triage
from harnessrl.rollout.plan import GroupPlan, plan_more, plan_step
from harnessrl.store import RunStore
from harnessrl.store.records import Lineage
from harnessrl.tree.filters import FilterConfig
from tests.support.synthetic import conversation_calls, make_rollout
from tests.support.tasks import PassTask as Task

S = [10, 11]




def calls_of(rid: str, n_calls: int, logprob=None, base: int = 0) -> list:
    """A linear conversation of n_calls calls with distinct completions per rollout."""
    calls = conversation_calls(rid, S, [([100 + base + k], [5]) for k in range(n_calls)])
    if logprob is not None:
        calls = [replace(c, logprobs=[logprob(c.seq)] * len(c.sampled_ids)) for c in calls]
    return calls


def group(rewards, n_calls: int = 4, group_id: str = "g0"):
    rollouts = [replace(make_rollout(f"r{i}", r, group_id=group_id), sample_idx=i) for i, r in enumerate(rewards)]
    calls = [c for i in range(len(rewards)) for c in calls_of(f"r{i}", n_calls, base=10 * i)]
    return rollouts, calls


# -- the tracker -----------------------------------------------------------------------------------

def test_tracker_shrinks_a_new_task_to_its_family_and_weights_near_one_half():
    cfg = SamplerConfig(type="difficulty", floor=0.1, prior=2.0, concentration=2.0, decay=1.0)
    t = DifficultyTracker([Observation(1, "a", "chain", "h", 0, 8), Observation(1, "b", "file", "h", 4, 8)], cfg)
    assert t.family_rate("chain", "h", at=2) == pytest.approx(1 / 10)
    assert t.pass_rate("new", "chain", "h", at=2) == pytest.approx(1 / 10)  # never sampled: its family's rate
    assert t.pass_rate("a", "chain", "h", at=2) == pytest.approx((2 * 0.1 + 0) / 10)
    assert t.posterior("b", "file", "h", at=2) == pytest.approx((2 * 0.5 + 4, 2 * 0.5 + 4))
    assert t.weight("b", "file", "h", at=2, n=4) == pytest.approx(t.p_mixed("b", "file", "h", 2, 4))  # near 0.5
    assert t.weight("b", "file", "h", at=2, n=4) > 0.6  # k fitted 2.8: a group's rate Beta(1.4, 1.4)
    assert t.weight("a", "chain", "h", at=2, n=4) == pytest.approx(0.1)  # P(mixed) = 0.07: the floor
    assert t.pass_rate("a", "chain", "other", at=2) == pytest.approx(0.5)  # per harness: nothing known
    uniform = DifficultyTracker(t.observations, SamplerConfig())
    assert uniform.weight("a", "chain", "h", at=2, n=4) == 1.0


def test_older_groups_count_less():
    cfg = SamplerConfig(type="difficulty", prior=2.0, decay=0.5)
    t = DifficultyTracker([Observation(1, "a", "f", "h", 4, 4), Observation(3, "a", "f", "h", 0, 4)], cfg)
    # at step 4: the step-3 group weighs 1, the step-1 group 0.25
    assert t.pass_rate("a", "f", "h", at=4) < 0.5 < DifficultyTracker(t.observations[:1], cfg).pass_rate(
        "a", "f", "h", at=4)


def test_tracker_file_round_trips_and_is_cut_to_the_resume_point(tmp_path):
    t = DifficultyTracker([Observation(s, "a", "f", "h", s % 2, 3, passing=f"s{s}-a1-g0:1") for s in (1, 2, 3)])
    t.save(tmp_path)
    back = DifficultyTracker.load(tmp_path, last_step=2)
    assert back.observations == t.observations[:2]
    assert DifficultyTracker.load(tmp_path).observations == t.observations
    assert DifficultyTracker.load(tmp_path / "new").observations == []
    assert back.borrowable("a", "h", before=3).rollout_id == "s2-a1-g0:1"
    assert back.borrowable("a", "h", before=1) is None
    (tmp_path / "difficulty.json").write_text('{"observations": [{"step": 1}]}')
    with pytest.raises(ValueError, match="not a difficulty tracker file"):
        DifficultyTracker.load(tmp_path)


def test_a_step_is_planned_from_the_steps_that_ended_before_it_could_start():
    assert planned_from(5, 0) == 4 and planned_from(5, 1) == 4 and planned_from(5, 2) == 3


def test_weighted_plan_prefers_heavy_tasks_and_is_deterministic():
    tasks = [Task(f"t{i}") for i in range(6)]
    heavy = {"t4", "t5"}
    weight = lambda t, h: 100.0 if t.id in heavy else 0.01  # noqa: E731
    plans = plan_step(3, 1, tasks, {"a": 1, "b": 1}, 2, 4, 0, weight)
    assert {p.task.id for p in plans} == heavy  # without repeats while tasks are left
    assert plans == plan_step(3, 1, tasks, {"a": 1, "b": 1}, 2, 4, 0, weight)
    more = plan_more(3, 1, tasks, ["a", "b"], 2, 4, 0, weight, exclude=["t4", "t5"])
    assert [p.group_id for p in more] == ["s3-a1-g2", "s3-a1-g3"] and [p.harness for p in more] == ["a", "b"]
    assert not {p.task.id for p in more} & heavy
    # no weight: the uniform plan of before, unchanged
    assert [p.task for p in plan_step(3, 1, tasks, {"a": 1}, 2, 4, 0)] == \
        [p.task for p in plan_step(3, 1, tasks, {"a": 1}, 2, 4, 0, None)]


# -- triage and replacements ----------------------------------------------------------------------

def planned(rewards, gid: str, harness: str = "h") -> PlannedGroup:
    rollouts, calls = group(rewards, group_id=gid)
    return PlannedGroup(GroupPlan(gid, Task("t" + gid), harness, len(rewards), "train", 1), rollouts, calls)


def test_triage_sorts_mixed_borrowable_and_uniform_groups():
    groups = [planned([1, 0, 0], "m"), planned([0, 0, 0], "f"), planned([1, 1, 1], "p"), planned([0, 0, 0], "b"),
              planned([None, None], "u")]
    t = triage(groups, "pass", can_borrow=lambda plan: plan.group_id == "b")
    assert [g.plan.group_id for g in t.mixed] == ["m"]
    assert [g.plan.group_id for g in t.borrowable] == ["b"]
    assert [(g.plan.group_id, why) for g, why in t.uniform] == [("f", "all_fail"), ("p", "all_pass"),
                                                                ("u", "unscored")]
    assert group_outcome(planned([0.5, 0.5], "s").rollouts, None, "score") == "same_score"
    assert group_outcome(planned([0.5, 0.2], "s").rollouts, None, "score") == "mixed"
    assert group_outcome(planned([0.5, 0.2], "s").rollouts, None, "pass") == "all_fail"


def test_replacements_go_to_the_harness_furthest_below_its_share():
    assert replacement_harnesses({"a": 1, "b": 1}, 4, ["a", "a"], 2) == ["b", "b"]
    assert replacement_harnesses({"a": 1, "b": 1}, 4, ["a", "b"], 3) == ["a", "b", "a"]
    with pytest.raises(ValueError, match="oversample"):
        DynamicSamplingConfig(enabled=True, max_extra_groups=1, oversample=2)


# -- branching that makes contrast ----------------------------------------------------------------

def test_target_call_lands_branches_near_one_half():
    assert target_call(4, 0.0, True) == pytest.approx(2.0)  # p = 0: halfway
    assert target_call(6, 1 / 6, True) == pytest.approx(6 * (1 / 3) / (5 / 6))
    assert target_call(4, 0.75, False) == pytest.approx(4 * 0.25 / 0.75)


def test_target_policy_branches_the_rarer_outcome_at_its_target_call():
    cfg = BranchingConfig(points=1, width=2, placement="target")
    low, calls = group([0, 0, 0, 1], n_calls=5)  # p = 1/4: j* = 5 (1/4) / (3/4) = 1.67 -> call 2
    assert [(p.parent, p.branch_call) for p in branch_points(low, calls, cfg)] == [("r3", 2)]
    high, calls = group([1, 1, 1, 0], n_calls=5)  # p = 3/4, failing parent: j* = 5 (1/4) / (3/4) -> 2
    assert [(p.parent, p.branch_call) for p in branch_points(high, calls, cfg)] == [("r3", 2)]
    two, calls = group([1, 0, 0, 1, 0, 0], n_calls=4)  # p = 1/3: j* = 4 (1/6) / (2/3) = 1
    assert [(p.parent, p.branch_call) for p in branch_points(two, calls, BranchingConfig(points=3, placement="target"))] == \
        [("r0", 1), ("r3", 1), ("r0", 2)]  # the passing parents only, then their next-nearest call
    for uniform in ([0, 0, 0], [1, 1, 1]):
        rollouts, calls = group(uniform)
        assert branch_points(rollouts, calls, cfg) == []  # no contrast to make: no branch rollouts spent
    # entropy, for comparison, goes where the policy was least sure: here a failing parent
    sure = lambda seq: -0.01  # noqa: E731
    calls = [*calls_of("r0", 3, sure), *calls_of("r1", 3, lambda seq: -3.0 if seq == 2 else -0.01)]
    rollouts = [replace(make_rollout("r0", 1.0), sample_idx=0), replace(make_rollout("r1", 0.0), sample_idx=1),
                replace(make_rollout("r2", 0.0), sample_idx=2)]
    assert branch_points(rollouts, calls, BranchingConfig(points=1, placement="entropy"))[0].parent == "r1"
    assert branch_points(rollouts, calls, cfg)[0].parent == "r0"


def test_an_all_fail_group_borrows_a_passing_prefix_from_an_earlier_step(tmp_path):
    cfg = BranchingConfig(points=1, width=2, placement="target", borrow=True)
    store = RunStore(tmp_path)
    try:
        earlier = replace(make_rollout("s1-a1-g0:2", 1.0, group_id="s1-a1-g0"), sample_idx=2)
        store.put_rollout(earlier)
        store.insert_calls(calls_of(earlier.rollout_id, 4))
        rollouts, calls = group([0, 0, 0], group_id="s2-a1-g1")
        for r in rollouts:
            store.put_rollout(r)
        store.insert_calls(calls)
        plan = GroupPlan("s2-a1-g1", Task("t"), "synthetic", 3, "train", 2)
        [wave] = branch_plans(store, [plan], cfg, borrow=lambda p: earlier.rollout_id)
        assert [(b.parent, b.branch_call) for b in wave.branches] == [(earlier.rollout_id, 2)] * 2  # half its 4 calls
        assert wave.group_id == plan.group_id and wave.first == 3
        assert branch_plans(store, [plan], cfg, borrow=lambda p: None) == []  # nothing to borrow, no branch
        off = BranchingConfig(points=1, width=2, placement="target")
        assert branch_plan(plan, rollouts, calls, off, borrowed=(earlier.rollout_id, [])) is None
    finally:
        store.close()


def borrowed_branch_group():
    """A step-2 group: r0, r1 failed; b0, b1 replayed the first 2 calls of s1:p (a passing
    rollout of step 1, not in the group), then sampled their own call 2: b0 passed, b1 failed."""
    parent = calls_of("s1:p", 3, base=50)
    rollouts, calls = group([0, 0], n_calls=3)
    for name, reward, tail in (("b0", 1.0, [7]), ("b1", 0.0, [8])):
        mine = conversation_calls(name, S, [([150], [5]), ([151], [5]), (tail, [])])
        for k in range(2):  # the replayed answers: the parent's ids, marked as replayed
            mine[k] = replace(mine[k], meta={"replay": {"of": parent[k].call_id, "match": "exact"}})
        calls += mine
        rollouts.append(replace(make_rollout(name, reward), sample_idx=len(rollouts),
                                lineage=Lineage("s1:p", 2, replayed=2, exact=2)))
    return PlannedGroup(GroupPlan("g0", Task("t"), "synthetic", 4, "train", 2), rollouts, calls)


def test_replayed_calls_of_a_borrowed_prefix_carry_zero_weight():
    g = borrowed_branch_group()
    assert group_outcome(g.rollouts, None) == "mixed"
    [tree], [adv] = step_advantages([g], _algo("tree_grpo"), FilterConfig())
    flat = tree.flat()
    replayed = np.isin(flat.tokens, [150, 151])
    assert replayed.any()
    assert not flat.decision[replayed].any()
    assert np.all(adv.weight_sum[replayed] == 0) and np.all(adv.adv_pos[replayed] == 0)
    assert np.all(adv.adv_neg[replayed] == 0)
    own = np.isin(flat.tokens, [7, 8])  # the branches' own decisions train, with opposite signs
    assert flat.decision[own].all() and adv.weight_sum[own].min() > 0
    assert adv.adv_pos[flat.tokens == 7].sum() > 0 > adv.adv_neg[flat.tokens == 8].sum()
    assert branch_point_outcomes(g.rollouts, None) == {"points": 1, "mixed": 1, "borrowed_points": 1,
                                                       "borrowed_mixed": 1}


def test_branch_point_outcomes_count_subtrees_with_both_outcomes():
    rollouts, _ = group([1, 0, 0])
    rollouts += [replace(make_rollout("x0", 0.0), lineage=Lineage("r0", 1)),  # parent passed, branch failed
                 replace(make_rollout("x1", 0.0), lineage=Lineage("r1", 2)),  # parent and branches failed
                 replace(make_rollout("x2", 0.0), lineage=Lineage("r1", 2)),
                 replace(make_rollout("x3", 1.0), lineage=Lineage("r2", 1, diverged="prompt"))]  # not counted
    assert branch_point_outcomes(rollouts, None) == {"points": 3, "mixed": 1, "borrowed_points": 0,
                                                     "borrowed_mixed": 0}


def _algo(name: str):
    from harnessrl.algo.estimator import EstimatorOnly

    return EstimatorOnly(name=name, reward="pass")
