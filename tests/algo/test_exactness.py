"""Training on the tree (A+/A- per token) equals training every rollout / path separately."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from harnessrl.algo import gae, gae_1d, grpo, tree_grpo
from harnessrl.tree import build_tree
from harnessrl.tree.filters import FilterConfig
from tests.support.synthetic import make_call, make_rollout

CLIP_LOW, CLIP_HIGH = 0.2, 0.28


def random_group(seed: int):
    """Rollouts over a 3-token vocabulary: extensions, compactions, shared samples, failures."""
    rng = np.random.default_rng(seed)
    calls, rollouts = [], []
    system = [7, 7]
    for i in range(int(rng.integers(1, 5))):
        rid = f"r{i}"
        prev: list[int] = list(system)
        for k in range(int(rng.integers(1, 4))):
            if k and rng.random() < 0.3:
                prev = prev[: int(rng.integers(0, len(prev) + 1))]  # history rewritten
            prompt = prev + rng.integers(0, 3, int(rng.integers(0, 3))).tolist()
            sampled = rng.integers(0, 3, int(rng.integers(1, 4))).tolist()
            finish = "length" if rng.random() < 0.15 else "stop"
            calls.append(make_call(rid, k, prompt, sampled, finish=finish))
            prev = prompt + sampled
        status = "ok" if rng.random() < 0.8 else "timeout"
        rollouts.append(make_rollout(rid, float(rng.integers(0, 3)), status))
    # random prompts read as side calls; the reference below has no side-call rule (test_call_classes.py)
    tree = build_tree(calls, rollouts, FilterConfig(side_calls="train"))
    tree.source_calls = calls  # for the independent reference below
    return tree


def ppo_token(ratio, adv):
    clipped = np.clip(ratio, 1 - CLIP_LOW, 1 + CLIP_HIGH)
    return np.minimum(ratio * adv, clipped * adv)


def tree_objective(adv, ratio):
    clipped = np.clip(ratio, 1 - CLIP_LOW, 1 + CLIP_HIGH)
    return float((adv.adv_pos * np.minimum(ratio, clipped) + adv.adv_neg * np.maximum(ratio, clipped)).sum())


def prefix_index(tree) -> dict[tuple, int]:
    flat = tree.flat()
    out, prefix_of = {}, []
    for q in range(len(flat)):
        parent = int(flat.parent_index[q])
        prefix_of.append((prefix_of[parent] if parent >= 0 else ()) + (int(flat.tokens[q]),))
        out[prefix_of[-1]] = q
    return out


def rollout_decisions(tree, rid):
    """Flat indices of the tokens rid sampled in trainable calls, from the calls themselves:
    not truncated, not retried (same prompt sent again later with another completion), position > 0."""
    index = prefix_index(tree)
    own = [c for c in tree.source_calls if c.rollout_id == rid]
    out = set()
    for c in own:
        later = [d for d in own if d.seq > c.seq and d.prompt_ids == c.prompt_ids]
        if c.finish_reason == "length" or (later and later[-1].sampled_ids != c.sampled_ids):
            continue
        seq = tuple(c.prompt_ids) + tuple(c.sampled_ids)
        out.update(index[seq[:p + 1]] for p in range(max(1, len(c.prompt_ids)), len(seq)))
    return np.array(sorted(out), dtype=np.int64)


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 10_000))
@example(4759)  # seeds whose groups hold a complete duplicate of a truncated call (tree/build.py)
@example(5513)
@example(5993)
@example(7567)
def test_grpo_and_tree_grpo_tree_loss_equals_per_rollout_loss(seed):
    tree = random_group(seed)
    flat = tree.flat()
    ratio = np.exp(np.random.default_rng(seed).normal(0, 0.3, len(flat)))
    n_dec = {r: len(rollout_decisions(tree, r)) for r in tree.kept_rollouts()}
    cases = [(grpo(tree), lambda r: 1.0 / n_dec[r]),
             (grpo(tree, std=False, loss_agg="token_mean"), lambda r: 1.0),
             (tree_grpo(tree, std=False), lambda r: 1.0 / n_dec[r])]
    for est, weight in cases:
        separate = 0.0
        for rid in tree.kept_rollouts():
            q = rollout_decisions(tree, rid)
            if not len(q):
                continue
            a = np.array([own_adv(est, rid, int(x)) for x in q])
            separate += float((weight(rid) * ppo_token(ratio[q], a)).sum())
        assert np.isclose(tree_objective(est, ratio), separate, rtol=1e-4, atol=1e-5)


def own_adv(est, rid: str, q: int) -> float:
    """The advantage of rollout rid's own contribution on flat token q (grpo, tree_grpo: one per rollout)."""
    return next(a for r, _, a, _ in est.token_contributions(q) if r == rid)


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 10_000))
@example(4759)  # seeds whose groups hold a complete duplicate of a truncated call (tree/build.py)
@example(5513)
@example(5993)
@example(7567)
def test_gae_tree_loss_equals_per_path_loss(seed):
    tree = random_group(seed)
    flat = tree.flat()
    rng = np.random.default_rng(seed)
    ratio = np.exp(rng.normal(0, 0.3, len(flat)))
    values = rng.normal(size=len(flat))
    est = gae(tree, values, gamma=0.95, lam=0.9)
    separate, value_sep = 0.0, 0.0
    new_v = rng.normal(size=len(flat))
    kept = set(tree.kept_rollouts())
    n_dec = {r: len(rollout_decisions(tree, r)) for r in kept}
    for path in tree.paths:
        if path.rollout_id not in kept or not n_dec[path.rollout_id]:
            continue
        mine = set(rollout_decisions(tree, path.rollout_id).tolist())
        q = np.array([x for n in path.nodes for x in range(flat.node_offsets[n], flat.node_offsets[n + 1])
                      if x in mine], dtype=np.int64)
        if not len(q):
            continue
        a = gae_1d(values[q], np.zeros(len(q)), tree.rollouts[path.rollout_id].reward, 0.95, 0.9)
        m = np.array([sum(1 for p in tree.paths_of(path.rollout_id) if flat.node_index[x] in p.nodes) for x in q])
        w = 1.0 / n_dec[path.rollout_id] / m
        separate += float((w * ppo_token(ratio[q], a)).sum())
        value_sep += float((w * (new_v[q] - (a + values[q])) ** 2).sum())
    assert np.isclose(tree_objective(est, ratio), separate, rtol=1e-4, atol=1e-5)
    # value loss: W (V - mean_w R)^2 has the same gradient in V as the per-path sum
    dec = est.weight_sum > 0
    grad_tree = 2 * est.weight_sum[dec] * (new_v[dec] - est.ret_mean[dec])
    grad_sep = np.zeros(len(flat))
    for q in range(len(flat)):
        for rid, p, a, w in est.token_contributions(q):
            grad_sep[q] += 2 * w * (new_v[q] - (a + values[q]))
    assert np.allclose(grad_tree, grad_sep[dec], rtol=1e-4, atol=1e-5)
    assert value_sep >= 0
