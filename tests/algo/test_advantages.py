"""Advantage estimators against hand-computed values on small trees."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harnessrl.algo import decision_counts, gae, gae_1d, grpo, normalize_rewards, tree_grpo, whiten
from harnessrl.tree import build_tree
from tests.support.synthetic import conversation_calls, make_call, make_rollout

S = [10, 11]


def small_tree():
    """root -> [10 11] -> [1] -> {[2] a (R=1), [3] b (R=0)};  [10 11] -> [4] c (R=0); e timed out."""
    calls = [make_call("a", 0, S, [1, 2]), make_call("b", 0, S, [1, 3]), make_call("c", 0, S, [4]),
             make_call("e", 0, S, [1, 9])]
    rollouts = [make_rollout("a", 1.0), make_rollout("b", 0.0), make_rollout("c", 0.0),
                make_rollout("e", None, status="timeout")]
    return build_tree(calls, rollouts)


def by_token(tree, adv):
    """token id -> (adv_pos, adv_neg, weight) for the decision tokens (ids are unique here)."""
    flat = tree.flat()
    pos, neg, w = adv.adv_pos, adv.adv_neg, adv.weight_sum
    return {int(flat.tokens[q]): (float(pos[q]), float(neg[q]), float(w[q]))
            for q in np.flatnonzero(flat.decision)}


def same_tokens(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(a[k] == pytest.approx(b[k], rel=1e-5, abs=1e-7) for k in a)


def test_small_tree_shape():
    tree = small_tree()
    assert tree.kept_rollouts() == ["a", "b", "c"]
    assert decision_counts(tree) == {"a": 2, "b": 2, "c": 1}
    assert 9 not in tree.flat().tokens.tolist()  # the timed-out rollout's own branch is pruned


def test_grpo_hand_computed():
    tree = small_tree()
    adv = grpo(tree)
    s2 = math.sqrt(2.0)  # A_a = (2/3) / sqrt(2/9) = sqrt(2); A_b = A_c = -1/sqrt(2)
    assert adv.rollout_adv == pytest.approx({"a": s2, "b": -1 / s2, "c": -1 / s2}, rel=1e-5)
    t = by_token(tree, adv)
    # seq_mean_token_mean: w_a = w_b = 1/2, w_c = 1
    assert t[1] == pytest.approx((s2 / 2, -1 / s2 / 2, 1.0), rel=1e-5)
    assert t[2] == pytest.approx((s2 / 2, 0.0, 0.5), rel=1e-5)
    assert t[3] == pytest.approx((0.0, -1 / s2 / 2, 0.5), rel=1e-5)
    assert t[4] == pytest.approx((0.0, -1 / s2, 1.0), rel=1e-5)
    assert adv.norm == 3.0
    assert "e" not in adv.rollout_ids
    q1 = int(np.flatnonzero(tree.flat().tokens == 1)[0])
    assert sorted(r for r, *_ in adv.token_contributions(q1)) == ["a", "b"]


def test_dr_grpo_and_loss_aggregations():
    tree = small_tree()
    dr = grpo(tree, std=False, loss_agg="seq_sum")
    assert dr.rollout_adv == pytest.approx({"a": 2 / 3, "b": -1 / 3, "c": -1 / 3})
    t = by_token(tree, dr)
    assert t[1] == pytest.approx((2 / 3, -1 / 3, 2.0))
    assert dr.norm == 3.0
    tm = grpo(tree, loss_agg="token_mean")
    assert tm.norm == 5.0 and by_token(tree, tm)[4][2] == 1.0
    with pytest.raises(ValueError, match="loss_agg"):
        grpo(tree, loss_agg="mean")


def test_tree_grpo_without_branches_is_grpo():
    # no branch point: every rollout is drawn at the root, so each row is GRPO's (algo/tree_credit.py);
    # V(root)=1/3, V([1])=1/2 (the node a and b share), V([2])=1, V([3])=V([4])=0
    tree = small_tree()
    adv, flat = tree_grpo(tree), grpo(tree)
    assert same_tokens(by_token(tree, adv), by_token(tree, flat))
    assert adv.rollout_adv == pytest.approx(flat.rollout_adv, rel=1e-5) and adv.norm == flat.norm
    assert adv.node_value[:3] == pytest.approx([1 / 3, 1 / 3, 1 / 2])
    undivided = by_token(tree, tree_grpo(tree, std=False))
    assert undivided[2] == pytest.approx((2 / 3 * 0.5, 0.0, 0.5))  # (1 - 1/3) x w_a
    assert undivided[4] == pytest.approx((0.0, -1 / 3, 1.0))


def test_tree_grpo_on_a_rewritten_history_is_grpo():
    # a's second call extends its path, then a compaction restarts it: one draw on two paths
    a = conversation_calls("a", S, [([1, 2], [5]), ([6], [])])
    compacted = make_call("a", 2, S + [7], [8])
    b = [make_call("b", 0, S, [1, 3])]
    tree = build_tree(a + [compacted] + b, [make_rollout("a", 1.0), make_rollout("b", 0.0)])
    assert len(tree.paths_of("a")) == 2
    assert same_tokens(by_token(tree, tree_grpo(tree)), by_token(tree, grpo(tree)))


def test_gae_single_path_equals_textbook():
    rng = np.random.default_rng(0)
    values = rng.normal(size=7)
    rewards = rng.normal(size=7)
    gamma, lam, final = 0.9, 0.7, 1.5
    adv = gae_1d(values, rewards, final, gamma, lam)
    r = rewards.copy()
    r[-1] += final
    v_next = np.append(values[1:], 0.0)
    delta = r + gamma * v_next - values
    expected = [sum((gamma * lam) ** l * delta[t + l] for l in range(7 - t)) for t in range(7)]
    assert adv == pytest.approx(expected)


def test_gae_on_tree_skips_context_tokens():
    # one rollout, three turns: decision tokens are separated by context tokens
    calls = conversation_calls("a", S, [([1, 2], [50, 51]), ([3], [52]), ([4, 5], [])])
    tree = build_tree(calls, [make_rollout("a", 2.0)])
    flat = tree.flat()
    values = np.linspace(0.1, 0.9, len(flat))
    out = gae(tree, values, gamma=0.9, lam=0.8)
    dec = np.flatnonzero(flat.decision)
    assert flat.tokens[dec].tolist() == [1, 2, 3, 4, 5]
    expected = gae_1d(values[dec], np.zeros(5), 2.0, 0.9, 0.8)
    got = [out.token_contributions(q)[0][2] for q in dec]
    assert got == pytest.approx(expected, rel=1e-5)
    assert out.ret_mean[dec] == pytest.approx(expected + values[dec], rel=1e-5)
    # hand check of the last two tokens: delta_5 = 2 - v5; A_4 = (0.9 v5 - v4) + 0.72 A_5
    v4, v5 = values[dec[3]], values[dec[4]]
    assert got[4] == pytest.approx(2.0 - v5, rel=1e-5)
    assert got[3] == pytest.approx(0.9 * v5 - v4 + 0.72 * (2.0 - v5), rel=1e-5)
    assert out.weight_sum[dec] == pytest.approx(np.full(5, 1 / 5))


def test_gae_branching_rollout_weighs_like_an_unsplit_one():
    a = conversation_calls("a", S, [([1, 2], [5]), ([6], [])])
    compacted = make_call("a", 2, S + [7], [8])  # history rewritten: a second path
    b = [make_call("b", 0, S, [1, 3])]
    tree = build_tree(a + [compacted] + b, [make_rollout("a", 1.0), make_rollout("b", 0.0)])
    assert len(tree.paths_of("a")) == 2
    out = gae(tree, np.zeros(len(tree.flat())))
    per_rollout = {}
    for r, w in zip(out.rollout, out.weight):
        per_rollout[out.rollout_ids[r]] = per_rollout.get(out.rollout_ids[r], 0.0) + float(w)
    assert per_rollout == pytest.approx({"a": 1.0, "b": 1.0})
    with pytest.raises(ValueError, match="one entry per tree token"):
        gae(tree, np.zeros(3))


def test_per_harness_normalisation():
    rewards = {"a": 10.0, "b": 0.0, "c": 1.0, "d": 0.0}
    harness = {"a": "x", "b": "x", "c": "y", "d": "y"}
    joint = normalize_rewards(rewards, harness, "mean_std")
    split = normalize_rewards(rewards, harness, "mean_std", per_harness=True)
    assert split["a"] == pytest.approx(1.0, rel=1e-5) and split["c"] == pytest.approx(1.0, rel=1e-5)
    assert joint["c"] < 0 < split["c"]
    calls = [make_call(r, 0, S, [i]) for i, r in enumerate("abcd")]
    tree = build_tree(calls, [make_rollout(r, rewards[r], harness=harness[r]) for r in "abcd"])
    assert grpo(tree, per_harness=True).rollout_adv == pytest.approx(split, rel=1e-4)


def test_whiten_over_a_batch():
    tree = small_tree()
    out = whiten([grpo(tree, std=False), tree_grpo(tree)])
    adv = np.concatenate([o.adv for o in out])
    w = np.concatenate([o.weight for o in out])
    mean = (w * adv).sum() / w.sum()
    assert mean == pytest.approx(0.0, abs=1e-5)
    assert ((w * (adv - mean) ** 2).sum() / w.sum()) == pytest.approx(1.0, rel=1e-4)


def test_all_filtered_group_has_no_contributions():
    calls = [make_call("a", 0, S, [1])]
    tree = build_tree(calls, [make_rollout("a", None, status="sandbox_error")])
    for est in (grpo(tree), tree_grpo(tree), gae(tree, np.zeros(len(tree.flat())))):
        assert len(est.adv) == 0 and est.norm == 0.0


def test_per_harness_centres_tree_grpo_and_gae_rewards():
    calls = [make_call(r, 0, S, [i]) for i, r in enumerate("abcd")]
    rollouts = [make_rollout("a", 10.0, harness="x"), make_rollout("b", 8.0, harness="x"),
                make_rollout("c", 1.0, harness="y"), make_rollout("d", 0.0, harness="y")]
    tree = build_tree(calls, rollouts)
    t = by_token(tree, tree_grpo(tree, per_harness=True, std=False))
    # centred per harness: a=+1, b=-1, c=+0.5, d=-0.5 on each own node
    assert [t[i][0] + t[i][1] for i in range(4)] == pytest.approx([1.0, -1.0, 0.5, -0.5])
    assert by_token(tree, tree_grpo(tree, std=False))[2][1] < 0  # without it, c (R=1) is below the joint mean
    assert tree_grpo(tree, per_harness=True).rollout_adv == pytest.approx(
        grpo(tree, per_harness=True).rollout_adv, rel=1e-4)
    out = gae(tree, np.zeros(len(tree.flat())), per_harness=True)
    assert sorted(out.adv.tolist()) == pytest.approx([-1.0, -0.5, 0.5, 1.0])


def test_a_span_seen_only_as_filtered_output_carries_no_loss_for_that_rollout():
    # r sampled [1, 2] first but the harness retried the request (dead attempt); s sampled the
    # same [1, 2] and trains: the shared node is a decision for s only
    calls = [make_call("s", 0, S, [1, 2]), make_call("r", 0, S, [1, 2], call_id="r:first"),
             make_call("r", 1, S, [3], call_id="r:retry")]
    tree = build_tree(calls, [make_rollout("s", 1.0), make_rollout("r", 0.0)])
    shared = next(n for n in tree.nodes if n.tokens.tolist() == [1, 2])
    assert set(shared.rollouts) == {"r", "s"} and shared.decision_rollouts == ("s",)
    assert decision_counts(tree) == {"s": 2, "r": 1}
    adv = grpo(tree)
    q = int(tree.flat().node_offsets[shared.id])
    assert [c[0] for c in adv.token_contributions(q)] == ["s"]
