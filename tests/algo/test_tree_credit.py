"""Tree credit (algo/tree_credit.py, tree_grpo): exactly GRPO without branches, zero-sum over the
on-policy tokens of any group, credit at a branch point against the siblings there, and an
on-policy baseline however the branches are placed."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harnessrl.algo import grpo, tree_grpo
from harnessrl.store.records import Lineage
from tests.algo.branched_groups import random_branched_group, rollout_calls, tree_of
from tests.algo.test_exactness import random_group
from tests.support.synthetic import make_rollout


def weighted_sum(adv) -> float:
    return float((adv.adv.astype(np.float64) * adv.weight).sum())


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["seq_mean_token_mean", "token_mean", "seq_sum"]), st.booleans())
def test_without_branches_tree_grpo_is_grpo_on_every_token(seed, loss_agg, std):
    # random_group: compactions, shared samples, truncated calls, timeouts; no branch
    tree = random_group(seed)
    flat, tree_adv = grpo(tree, std=std, loss_agg=loss_agg), tree_grpo(tree, std=std, loss_agg=loss_agg)
    assert tree_adv.norm == pytest.approx(flat.norm)
    for name in ("adv_pos", "adv_neg", "weight_sum"):
        assert np.allclose(getattr(tree_adv, name), getattr(flat, name), rtol=1e-5, atol=1e-6), name
    for q in np.flatnonzero(tree.flat().decision):
        mine, theirs = sorted(tree_adv.token_contributions(int(q))), sorted(flat.token_contributions(int(q)))
        assert [c[0] for c in mine] == [c[0] for c in theirs]
        assert [c[2:] for c in mine] == [pytest.approx(c[2:], rel=1e-5, abs=1e-6) for c in theirs]


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 10_000), st.booleans())
def test_on_policy_advantages_sum_to_zero_with_or_without_branches(seed, borrowed):
    calls, rollouts = random_branched_group(seed, borrowed)
    tree = tree_of(calls, rollouts)
    adv = tree_grpo(tree)
    assert weighted_sum(adv) == pytest.approx(0.0, abs=1e-5)
    # replayed copies are context: no row of a branch above its branch point
    assert all(not tree.rollouts[adv.rollout_ids[r]].parent or adv.rollout_ids[r] in node.decision_rollouts
               for node in tree.nodes for q in range(len(node))
               for r in adv.rollout[adv.ptr[tree.flat().node_offsets[node.id] + q]:
                                    adv.ptr[tree.flat().node_offsets[node.id] + q + 1]])
    # a branch adds no unit to the loss denominator: one per fresh rollout (and per borrowed prefix)
    fresh = sum(1 for r in tree.kept_rollouts() if not tree.rollouts[r].parent)
    elsewhere = {(tree.rollouts[r].parent, tree.rollouts[r].branch_call) for r in tree.kept_rollouts()
                 if tree.rollouts[r].parent and tree.rollouts[r].parent not in tree.rollouts}
    assert adv.norm <= fresh + len(elsewhere)
    assert float(adv.weight.sum()) == pytest.approx(adv.norm, rel=1e-5)  # the group weighs its units, as grpo


def decided_at_call_two(copies: bool):
    """3-call rollouts: one shared first call [1]; the second decides ([2] passes, [3] fails); a
    closing [9]. a, c, d fresh; b1, b2 branch a at call 1 (copies: replaying [1]) or, without
    copies, sample the same calls fresh."""
    seqs = {"a": [[1], [2], [9]], "c": [[1], [3], [9]], "d": [[1], [3], [9]], "b1": [[1], [3], [9]],
            "b2": [[1], [2], [9]]}
    calls, rollouts = [], []
    for rid, seq in seqs.items():
        branch = copies and rid.startswith("b")
        calls += rollout_calls(rid, seq, "a" if branch else "", 1 if branch else 0)
        r = make_rollout(rid, float(seq[1] == [2]))
        rollouts.append(replace(r, lineage=Lineage("a", 1, replayed=1, exact=1)) if branch else r)
    return tree_of(calls, rollouts)


def node_signal(tree, adv, tokens: list[int]) -> tuple[float, float]:
    """(weighted mean advantage, summed weight x advantage) on the decision node with these tokens."""
    node = next(n for n in tree.nodes if n.tokens.tolist() == tokens and n.decision.any())
    q = int(tree.flat().node_offsets[node.id])
    rows = adv.token_contributions(q)
    return sum(a * w for *_, a, w in rows) / sum(w for *_, w in rows), sum(a * w for *_, a, w in rows)


def test_outcome_decided_at_the_second_call_credits_the_second_call_the_same_with_or_without_copies():
    rewards = np.array([1, 0, 0, 0, 1], dtype=float)  # a, c, d, b1, b2
    sigma = rewards.std()
    signals = []
    for copies in (True, False):
        tree = decided_at_call_two(copies)
        adv = tree_grpo(tree)
        # the shared first call nets 0: every continuation passes it
        assert node_signal(tree, adv, [1])[1] == pytest.approx(0.0, abs=1e-6)
        # a second-call node: the mean reward through it against its parent's (all five continuations)
        v_parent = rewards.mean()
        passing, failing = node_signal(tree, adv, [2])[0], node_signal(tree, adv, [3])[0]
        assert passing == pytest.approx((1.0 - v_parent) / sigma, rel=1e-5)
        assert failing == pytest.approx((0.0 - v_parent) / sigma, rel=1e-5)
        assert adv.node_value[0] == pytest.approx(v_parent)
        signals.append((passing, failing))
    assert signals[0] == pytest.approx(signals[1])
    # with copies, the branches' replayed first call is trained by nobody but the fresh samples
    tree = decided_at_call_two(True)
    first = next(n for n in tree.nodes if n.tokens.tolist() == [1])
    assert set(first.decision_rollouts) == {"a", "c", "d"}


def test_outcome_selected_copies_leave_the_baseline_on_policy():
    """The issue-42 example: 1 pass in 4 fresh rollouts, the passing one branched twice after its
    deciding call (the branches repeat its pass). The plain leaf mean made V(root) 1/2 and the
    advantages summed to -1.17; on-policy credit keeps V(root) = 1/4, gives the copies nothing of
    their own, and trains the fresh rollouts exactly as GRPO on the 4 would."""
    seqs = {"p": [[2], [9]], "f1": [[3], [9]], "f2": [[4], [9]], "f3": [[5], [9]]}
    calls, rollouts = [], []
    for rid, seq in seqs.items():
        calls += rollout_calls(rid, seq)
        rollouts.append(make_rollout(rid, float(rid == "p")))
    flat = grpo(tree_of(calls, rollouts))
    for k in range(2):
        calls += rollout_calls(f"b{k}", [[2], [9]], "p", 1)
        rollouts.append(replace(make_rollout(f"b{k}", 1.0), lineage=Lineage("p", 1, replayed=1, exact=1)))
    tree = tree_of(calls, rollouts)
    adv = tree_grpo(tree)
    assert adv.node_value[0] == pytest.approx(0.25)
    # one unit per fresh rollout, as on the 4 alone (GRPO on the group counted 6)
    assert adv.norm == pytest.approx(4.0)
    assert weighted_sum(adv) == pytest.approx(0.0, abs=1e-6)
    assert adv.rollout_adv == pytest.approx(flat.rollout_adv, rel=1e-5)
    rows = {adv.rollout_ids[r]: a for r, a in zip(adv.rollout, adv.adv)}
    assert rows["b0"] == rows["b1"] == pytest.approx(0.0)  # siblings that all passed: no contrast


def test_a_borrowed_prefix_is_a_start_of_its_own():
    """An all-fail group whose branches replay a rollout of an earlier step (not in the group):
    the replayed tokens train nobody, the branches are judged against each other, and V(root)
    stays the fresh samples' mean."""
    calls, rollouts = [], []
    for rid in ("f0", "f1"):
        calls += rollout_calls(rid, [[3], [9]])
        rollouts.append(make_rollout(rid, 0.0))
    for k, second in enumerate(([2], [4])):
        calls += rollout_calls(f"b{k}", [[1], second], "old", 1)
        rollouts.append(replace(make_rollout(f"b{k}", float(k == 0)), lineage=Lineage("old", 1, replayed=1, exact=1)))
    tree = tree_of(calls, rollouts)
    adv = tree_grpo(tree)
    assert adv.node_value[0] == pytest.approx(0.0)
    rows = {adv.rollout_ids[r]: (float(a), float(w)) for r, a, w in zip(adv.rollout, adv.adv, adv.weight)}
    assert {r for r, (a, _) in rows.items() if a != 0} == {"b0", "b1"}  # the fresh samples all failed alike
    assert rows["b0"][0] == pytest.approx(1.0, rel=1e-5) and rows["b1"][0] == pytest.approx(-1.0, rel=1e-5)
    assert adv.norm == pytest.approx(3.0)  # two fresh units and the borrowed prefix's one, shared
    replayed = next(n for n in tree.nodes if n.tokens.tolist() == [1])
    assert replayed.decision_rollouts == ()
