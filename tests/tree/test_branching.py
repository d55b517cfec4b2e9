"""Branched groups (rollout/branching.py, proxy/replay.py) in the tree, the estimators and the store:
replayed calls train once, diverged branches are left out, lineage round-trips, and tree-GRPO
credits the decision before a branch point by what followed it."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from harnessrl.algo import grpo, tree_grpo
from harnessrl.rollout.branching import (BranchingConfig, branch_plan, branch_points, branching_summary, rarer_outcome,
                                         sampling_budget)
from harnessrl.rollout.plan import Branch, GroupPlan
from harnessrl.store import RunStore
from harnessrl.store.records import Lineage
from harnessrl.tree import build_tree
from tests.support.synthetic import conversation_calls, make_call, make_rollout

S = [10, 11]


def replayed(call, of: str):
    return replace(call, meta={"replay": {"of": of, "match": "exact"}})


def branched_group(diverged: str = ""):
    """a: S -> [1] | obs [5] -> [2] (R=0);  c: S -> [4] (R=0);  b1, b2 branch a at call 1: call 0
    replayed ([1] again), then [3] (R=1) and [6] (R=1)."""
    a = conversation_calls("a", S, [([1], [5]), ([2], [])])
    b1 = conversation_calls("b1", S, [([1], [5]), ([3], [])])
    b2 = conversation_calls("b2", S, [([1], [5]), ([6], [])])
    calls = [*a, make_call("c", 0, S, [4]), replayed(b1[0], "a:0"), b1[1], replayed(b2[0], "a:0"), b2[1]]
    rollouts = [make_rollout("a", 0.0), make_rollout("c", 0.0),
                replace(make_rollout("b1", 1.0), lineage=Lineage("a", 1, replayed=1, exact=1)),
                replace(make_rollout("b2", 1.0), lineage=Lineage("a", 1, replayed=1, exact=1, diverged=diverged))]
    return calls, rollouts


def by_token(tree, adv):
    flat = tree.flat()
    return {int(flat.tokens[q]): (float(adv.adv_pos[q]), float(adv.adv_neg[q]), float(adv.weight_sum[q]))
            for q in np.flatnonzero(flat.decision)}


def test_replayed_tokens_are_decisions_of_the_parent_only():
    tree = build_tree(*branched_group())
    node1 = next(n for n in tree.nodes if n.tokens.tolist() == [1])
    assert node1.decision_rollouts == ("a",)  # sampled once, by the parent
    assert set(node1.rollouts) == {"a", "b1", "b2"}  # the branches pass through it
    assert tree.stats.filtered["replayed_calls"] == 2
    reasons = {tuple(n.tokens.tolist()): n.branch_reason for n in tree.nodes}
    assert reasons[(3,)] == reasons[(6,)] == "branch"
    assert tree.rollouts["b1"].parent == "a" and tree.rollouts["b1"].branch_call == 1


def test_tree_grpo_on_a_branched_tree_matches_a_hand_computed_example():
    tree = build_tree(*branched_group())
    adv = tree_grpo(tree)
    t = by_token(tree, adv)
    # draws: a and c at the root; a, b1, b2 at a's branch point x (after [1] | obs [5])
    # V(x) = mean(a, b1, b2) = 2/3; V(root) = mean over the fresh draws of what they stand for:
    # (V(x) + R_c) / 2 = 1/3, not the leaf mean 1/2 (the branches are no fresh samples of the root)
    # sigma^2 = q-weighted variance (q: c 1/2, a b1 b2 1/6 each) = 1/3 - 1/9 = 2/9
    sigma = math.sqrt(2 / 9)
    assert adv.node_value[0] == pytest.approx(1 / 3)
    # weights (seq_mean_token_mean): f x mass x c(point) / segment tokens, c = the mean share of a draw's
    # tokens in its segment: at the root a (1 of its 2) and c (1 of 1): 3/4; at x a (1/2), b1, b2 (1): 5/6;
    # f = 6/7 makes the weights sum to the group's 2 units, as grpo's do
    w_root, w_x = 3 / 4 * 6 / 7, 1 / 3 * 5 / 6 * 6 / 7
    # the branched decision [1] (a's prefix, mass 1): the mean of the continuations through it
    assert t[1] == pytest.approx(((2 / 3 - 1 / 3) / sigma * w_root, 0.0, w_root), rel=1e-5)
    # below x the three continuations share a's unit (1/3 each), each against V(x) only
    assert t[2] == pytest.approx((0.0, (0 - 2 / 3) / sigma * w_x, w_x), rel=1e-5)
    assert t[3] == pytest.approx(((1 - 2 / 3) / sigma * w_x, 0.0, w_x), rel=1e-5)
    assert t[6] == t[3]
    assert t[4] == pytest.approx((0.0, (0 - 1 / 3) / sigma * w_root, w_root), rel=1e-5)
    assert sum(w for *_, w in t.values()) == pytest.approx(2.0, rel=1e-5)
    assert adv.norm == pytest.approx(2.0)  # one unit per fresh rollout: the branches add none
    assert sum(p + n for p, n, _ in t.values()) == pytest.approx(0.0, abs=1e-6)  # zero-sum
    flat_adv = by_token(tree, grpo(tree))  # outcome GRPO: a's first decision gets a's (negative) reward
    assert flat_adv[1][0] == 0.0 and flat_adv[1][1] < 0


def test_a_diverged_branch_is_not_a_sibling():
    tree = build_tree(*branched_group(diverged="prompt"))
    assert not tree.rollouts["b2"].kept and tree.rollouts["b2"].filter_reason == "diverged_branches"
    assert "b2" not in tree.kept_rollouts()


def test_lineage_round_trips_through_the_store(tmp_path):
    store = RunStore(tmp_path)
    _, rollouts = branched_group(diverged="ended")
    for r in rollouts:
        store.put_rollout(r)
    back = {r.rollout_id: r for r in store.list_rollouts()}
    assert back["b2"].lineage == Lineage("a", 1, replayed=1, exact=1, diverged="ended")
    assert back["a"].lineage is None
    assert branching_summary(list(back.values())) == {
        "branches": 2, "diverged": 1, "diverged_prompt": 0, "diverged_ended": 1, "replayed_calls": 2,
        "exact_share": 1.0}
    store.close()


def test_branch_points_pick_the_least_certain_calls_deterministically():
    calls = [*conversation_calls("a", S, [([1], [5]), ([2], [7]), ([3], [])]),
             *conversation_calls("b", S, [([4], [5]), ([8], [])])]
    surprise = {("a", 1): -0.1, ("a", 2): -2.0, ("b", 1): -1.0}  # call -> logprob of each sampled token
    calls = [replace(c, logprobs=[surprise.get((c.rollout_id, c.seq), -0.5)] * len(c.sampled_ids)) for c in calls]
    rollouts = [replace(make_rollout("a", 0.0), sample_idx=0), replace(make_rollout("b", 1.0), sample_idx=1),
                replace(make_rollout("x", None, status="sandbox_error"), sample_idx=2)]
    cfg = BranchingConfig(points=2, width=3, placement="entropy")
    points = branch_points(rollouts, calls, cfg)
    assert [(p.parent, p.branch_call) for p in points] == [("a", 2), ("b", 1)]  # one per parent first; never call 0
    assert branch_points(rollouts, calls, BranchingConfig(points=3, placement="random"), seed=1) == \
        branch_points(rollouts, calls, BranchingConfig(points=3, placement="random"), seed=1)
    plan = GroupPlan("g0", object(), "builtin", 2, "train", 3)
    wave = branch_plan(plan, rollouts, calls, cfg)
    assert wave.n == 6 and wave.first == 3 and wave.step == 3
    assert [j.branch for j in wave.jobs()][:3] == [Branch("a", 2)] * 3
    assert [j.rollout_id for j in wave.jobs()][0] == "g0:3"
    assert branch_points(rollouts, calls, BranchingConfig()) == []  # off by default


def test_outcome_policy_branches_the_rarer_outcome_first():
    calls = [*conversation_calls("a", S, [([1], [5]), ([2], [7]), ([3], [])]),
             *conversation_calls("b", S, [([4], [5]), ([8], [])]),
             *conversation_calls("c", S, [([6], [5]), ([9], [])])]
    surprise = {("a", 2): -3.0, ("b", 1): -0.2, ("c", 1): -1.0}
    calls = [replace(c, logprobs=[surprise.get((c.rollout_id, c.seq), -0.5)] * len(c.sampled_ids)) for c in calls]

    def group(*rewards):
        return [replace(make_rollout(rid, r), sample_idx=i) for i, (rid, r) in enumerate(zip("abc", rewards))]

    outcome = BranchingConfig(points=1, placement="outcome")
    assert rarer_outcome(group(0.0, 1.0, 0.0), None) == {"b"}  # mostly failing: the pass is rarer
    assert [(p.parent, p.branch_call) for p in branch_points(group(0.0, 1.0, 0.0), calls, outcome)] == [("b", 1)]
    assert [(p.parent, p.branch_call) for p in branch_points(group(1.0, 0.0, 1.0), calls, outcome)] == [("b", 1)]
    assert [(p.parent, p.branch_call) for p in branch_points(group(1.0, 1.0, 0.0), calls, outcome)] == [("c", 1)]
    # one outcome only: no rarer one, so the least certain call, as `entropy` picks it
    same = branch_points(group(0.0, 0.0, 0.0), calls, outcome)
    assert same == branch_points(group(0.0, 0.0, 0.0), calls, BranchingConfig(points=1, placement="entropy"))
    assert same[0].parent == "a"
    # more points than rarer parents: the rest by surprisal
    two = branch_points(group(0.0, 1.0, 0.0), calls, BranchingConfig(points=2, placement="outcome"))
    assert [(p.parent, p.branch_call) for p in two] == [("b", 1), ("a", 2)]


def test_open_policy_branches_before_the_deciding_call_not_after_it():
    """3-call rollouts sharing a confident first call ([1]: a look); the second call decides ([2]
    passes, [3] fails): an uncertain next call whose continuations came out mixed in the group;
    the third is a verbose closing after which the outcome is settled. `entropy` takes the most
    surprising call, the closing (its branches copy their parent's outcome); `open` takes the first
    uncertain call after a tool result, the deciding one, without reading any outcome."""
    seqs = {"a": ([1], [2], [7]), "b": ([1], [3], [8]), "c": ([1], [3], [6])}
    surprise = {0: -0.02, 1: -0.8, 2: -1.5}  # call -> logprob of each sampled token
    calls = [replace(c, logprobs=[surprise[c.seq]] * len(c.sampled_ids))
             for rid, seq in seqs.items() for c in conversation_calls(rid, S, [(x, [50 + k]) for k, x in enumerate(seq)])]
    rollouts = [replace(make_rollout(rid, float(seq[1] == [2])), sample_idx=i) for i, (rid, seq) in enumerate(seqs.items())]
    tree = build_tree(calls, rollouts)
    after_look = next(n for n in tree.nodes if n.tokens.tolist() == [50])  # every rollout passes it
    assert {tree.rollouts[r].reward for r in after_look.rollouts} == {0.0, 1.0}  # mixed continuations
    by = lambda policy, n: [(p.parent, p.branch_call) for p in  # noqa: E731
                            branch_points(rollouts, calls, BranchingConfig(points=n, placement=policy))]
    assert by("entropy", 3) == [("a", 2), ("b", 2), ("c", 2)]  # settled: after the deciding call
    assert sorted(by("open", 3)) == [("a", 1), ("b", 1), ("c", 1)]
    # the parent's own sample at the point is not read (only the other parents' calls there)
    a_sure = [replace(c, logprobs=[-0.001] * len(c.sampled_ids)) if (c.rollout_id, c.seq) == ("a", 1) else c
              for c in calls]
    where = lambda cs: [(p.parent, p.branch_call) for p in branch_points(rollouts, cs, BranchingConfig(points=2))]  # noqa: E731
    assert where(a_sure) == where(calls)
    assert by("open", 4)[3][1] == 2  # a parent's later open call only once every parent has one
    # the same groups with other outcomes: `open` picks the same points (it reads no outcome)
    flipped = [replace(r, reward=1.0 - r.reward) for r in rollouts]
    assert branch_points(flipped, calls, BranchingConfig(points=3)) == branch_points(rollouts, calls, BranchingConfig(points=3))
    # a confident closing is no open point: below min_surprisal, nothing to branch after the decision
    settled = [replace(c, logprobs=[-0.02] * len(c.sampled_ids)) if c.seq == 2 else c for c in calls]
    assert {p.branch_call for p in branch_points(rollouts, settled, BranchingConfig(points=6))} == {1}
    assert len(branch_points(rollouts, settled, BranchingConfig(points=6))) == 3
    one_command = [replace(c, logprobs=[-0.02] * len(c.sampled_ids)) if c.seq else c for c in calls]
    assert branch_points(rollouts, one_command, BranchingConfig(points=2)) == []  # decided at call 0


def test_sampling_budget_counts_replayed_tokens_as_free():
    calls, rollouts = branched_group()
    budget = sampling_budget([(rollouts, calls)], nominal=4)
    # a: [1] [2], c: [4], b1/b2: [3] and [6] sampled, their [1] replayed
    assert budget == {"tokens_sampled": 5.0, "tokens_replayed": 2.0, "rollouts_per_group": 4.0,
                      "nominal_rollouts_per_group": 4.0}


def test_tree_views_show_branch_points_and_lineage():
    from rich.console import Console

    from harnessrl.tree.view_html import tree_html
    from harnessrl.tree.view_text import render_tree

    tree = build_tree(*branched_group())
    console = Console(record=True, width=200)
    console.print(render_tree(tree, decode=lambda ids: " ".join(map(str, ids))))
    text = console.export_text()
    assert "⑂ branch" in text and "a @ call 1" in text
    page = tree_html(tree, decode=lambda ids: " ".join(map(str, ids)))
    assert 'class="reason branchpoint"' in page and "a @ call 1" in page
