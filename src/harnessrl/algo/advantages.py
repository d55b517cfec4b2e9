"""Advantage estimators on a prefix tree: ``grpo``, ``tree_grpo`` (TreeRL), ``gae`` (the estimator of
algorithm ``ppo``: ESTIMATORS and TokenAdvantages.estimator name it ``ppo``).

All three return ``TokenAdvantages`` (see ``algo.contributions`` for the packed form and the exact
PPO algebra on shared tokens). Only kept rollouts (``RolloutInfo.kept``) enter: filtered rollouts
add no contribution and no reward to any statistic. K(s) below is the set of kept rollouts whose
calls pass through node s; "decision tokens of r" are the tokens a trainable call of r sampled
(``node.decision_rollouts``): a span r only saw as context (another rollout sampled the same
tokens after the same prefix, or r's own sampling call was filtered) carries no loss for r.

grpo (outcome):
    A_r = (R_r - mean_G R) / (std_G R + eps)          (std=False: Dr.GRPO, no division)
    on every decision token of rollout r; G = the kept rollouts of the group, or of the same
    harness with ``per_harness=True``. One contribution (A_r, w_r) per (token, rollout through it).

tree_grpo (on-policy tree credit, algo/tree_credit.py; docs/training.md "Tree credit"):
    draws: a fresh rollout is drawn at the root, a branch at its branch point; V(s) pools every
    continuation drawn at or above s, a branch point's pooled value standing for its subtree, so
    V(root) and the scale sigma (the reward std under the same weights) come from on-policy samples;
    for rollout r's decision tokens at node s with y the deepest branch point above s:
        A = (H_r(s) - V(y)) / (sigma + eps)       (std=False: no division)
    H_r(s) = V of the first branch point at or below s on r's way, or R_r. Per path the segment
    advantages telescope to (R_r - V(root)) / sigma; without branches every row is grpo's. A row's
    weight is the draw's mass at y (1 for a fresh rollout above any branch point; the draws at a
    point share the mass that reached it) times the loss_agg weight of its segment (for
    seq_mean_token_mean: f c(y) / the segment's decision tokens, c(y) the mean over y's draws of the
    share of their decision tokens in their segment, f the factor that makes the group's weights sum
    to D, as grpo's do; both 1 without branches); D = one unit per fresh rollout that trains
    (and per borrowed prefix), as grpo's: a branch or a branch point adds none (token_mean: the
    mass-weighted decision tokens).
    Departures from TreeRL (arXiv 2506.11902): no global term on a branch's own tokens (credit
    only against the siblings at its branch point), values weighted by where each rollout was
    drawn instead of the plain leaf mean, one scale per group, no 1/sqrt(|L(s)|).

gae (PPO with a critic; ``values[q]`` = critic value of the state whose next token is flat token
q, read at ``parent_index[q]`` like the logits that score q):
    along each kept root-to-end path p of rollout r, over its decision tokens t_1..t_T in order
    (context tokens skipped: next value and running advantage carry through them unchanged):
        delta_k = rew_k + gamma * V(t_{k+1}) - V(t_k)       (V(t_{T+1}) = 0)
        A_k = delta_k + gamma * lam * A_{k+1},   returns_k = A_k + V(t_k)
    rew_k = token_rewards[t_k] (optional, e.g. a KL penalty) plus R_r on t_T (R_r normalised as in
    tree_grpo when ``reward_norm`` / ``per_harness`` ask for it). One contribution
    (A_k, w_r / m_r(s)) per (token, path), m_r(s) = number of paths of r through node s, so a
    rollout that branched weighs as much as one that did not and summing the per-path terms is
    exactly training the paths separately.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

import numpy as np

from harnessrl.algo.contributions import LOSS_AGGS, TokenAdvantages, assemble, decision_counts, rollout_weights
from harnessrl.algo.tree_credit import TreeCredit, tree_credit
from harnessrl.tree.nodes import PrefixTree

RewardNorm = Literal["none", "mean", "mean_std"]
Rows = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]  # token, rollout, advantage, weight


def normalize_rewards(rewards: dict[str, float], harness: dict[str, str], mode: RewardNorm,
                      per_harness: bool = False, eps: float = 1e-6) -> dict[str, float]:
    """Group-normalised rewards: subtract the (harness) group mean, divide by its std if asked."""
    if mode not in ("none", "mean", "mean_std"):
        raise ValueError(f"unknown reward normalisation {mode!r}: use none, mean or mean_std")
    if mode == "none":
        return dict(rewards)
    groups: dict[str, list[str]] = {}
    for r in rewards:
        groups.setdefault(harness[r] if per_harness else "", []).append(r)
    out: dict[str, float] = {}
    for members in groups.values():
        vals = np.array([rewards[r] for r in members], dtype=np.float64)
        centred = vals - vals.mean()
        if mode == "mean_std":
            centred = centred / (vals.std() + eps)
        out.update(zip(members, centred.tolist()))
    return out


def _mode(reward_norm: RewardNorm, per_harness: bool) -> RewardNorm:
    """per_harness asks for per-harness centring: with reward_norm "none" that means "mean"."""
    return "mean" if per_harness and reward_norm == "none" else reward_norm


def _kept_rewards(tree: PrefixTree) -> tuple[dict[str, float], dict[str, str]]:
    kept = [tree.rollouts[r] for r in tree.kept_rollouts()]
    rewards = {r.rollout_id: float(r.reward) for r in kept if r.reward is not None}  # kept = rewarded
    return rewards, {r.rollout_id: r.harness for r in kept}


def _per_rollout_rows(tree: PrefixTree, node_adv: list[np.ndarray | dict[str, float]],
                      w: dict[str, float], ids: tuple[str, ...]) -> Rows:
    """Rows (token, rollout, adv, weight) for every decision token x rollout that sampled it.

    ``node_adv[s]`` is either a per-rollout dict (grpo) or a scalar array (tree_grpo)."""
    flat = tree.flat()
    index = {r: i for i, r in enumerate(ids)}
    toks, rols, advs, wts = [], [], [], []
    for node in tree.nodes:
        kept = [r for r in node.decision_rollouts if r in w]
        if not kept or not node.decision.any():
            continue
        q = flat.node_offsets[node.id] + np.flatnonzero(node.decision)
        a = node_adv[node.id]
        per_r = np.array([a[r] for r in kept] if isinstance(a, dict) else [float(a)] * len(kept))
        toks.append(np.repeat(q, len(kept)))
        rols.append(np.tile([index[r] for r in kept], len(q)))
        advs.append(np.tile(per_r, len(q)))
        wt = np.tile([w[r] for r in kept], len(q))
        if node.loss_weight is not None:  # a side call's decisions (filters.side_calls = weight)
            wt = wt * np.repeat(node.loss_weight[np.flatnonzero(node.decision)], len(kept))
        wts.append(wt)
    if not toks:
        empty = np.zeros(0)
        return empty.astype(np.int64), empty.astype(np.int32), empty, empty
    return np.concatenate(toks), np.concatenate(rols), np.concatenate(advs), np.concatenate(wts)


def grpo(tree: PrefixTree, *, std: bool = True, per_harness: bool = False, eps: float = 1e-6,
         loss_agg: str = "seq_mean_token_mean") -> TokenAdvantages:
    """Outcome GRPO on the tree; ``std=False, loss_agg="seq_sum"`` is Dr.GRPO."""
    rewards, harness = _kept_rewards(tree)
    adv = normalize_rewards(rewards, harness, "mean_std" if std else "mean", per_harness, eps)
    w, norm = rollout_weights(decision_counts(tree), loss_agg)
    ids = tuple(tree.kept_rollouts())
    rows = _per_rollout_rows(tree, [adv] * len(tree.nodes), w, ids)
    values = _node_values(tree, rewards)
    return _finish("grpo", tree, ids, rows, None, None, norm, values, adv)


def _node_values(tree: PrefixTree, rewards: dict[str, float]) -> np.ndarray:
    """V(s) = mean reward of the kept rollouts through s (nan where none)."""
    out = np.full(len(tree.nodes), np.nan, dtype=np.float64)
    for node, kept in zip(tree.nodes, tree.node_kept_rollouts()):
        vals = [rewards[r] for r in kept if r in rewards]
        if vals:
            out[node.id] = float(np.mean(vals))
    return out


def tree_grpo(tree: PrefixTree, *, std: bool = True, per_harness: bool = False, eps: float = 1e-6,
              loss_agg: str = "seq_mean_token_mean") -> TokenAdvantages:
    """On-policy tree credit (module docstring; algo/tree_credit.py): each draw's segment between
    branch points is credited with the value change across it, in units of the group's on-policy
    reward std (``std=False``: none); without branches this is exactly ``grpo``."""
    if loss_agg not in LOSS_AGGS:
        raise ValueError(f"unknown loss_agg {loss_agg!r}: use one of {', '.join(LOSS_AGGS)}")
    rewards, harness = _kept_rewards(tree)
    credit = tree_credit(tree, rewards)
    base, scale = _baselines(credit, harness, per_harness)
    seg = _segment_tokens(tree, credit)
    share = _segment_share(seg, decision_counts(tree))
    if loss_agg == "token_mean":
        norm = sum(credit.mass[k] * n for k, n in seg.items())
    else:  # one unit per fresh rollout that trains, one per start of its own (a borrowed prefix)
        norm = len({r for (y, r) in seg if credit.origin[r] == 0}) + len(
            {credit.start[y] for (y, _) in seg if credit.start.get(y, 0) != 0})
    total = sum(credit.mass[k] * share[k[0]] for k in seg)
    fit = norm / total if loss_agg == "seq_mean_token_mean" and total > 0 else 1.0  # 1 without branches
    flat = tree.flat()
    ids = tuple(tree.kept_rollouts())
    index = {r: i for i, r in enumerate(ids)}
    toks, rols, advs, wts = [], [], [], []
    for node in tree.nodes:
        if not node.decision.any():
            continue
        y = int(credit.upper[node.id])
        q = flat.node_offsets[node.id] + np.flatnonzero(node.decision)
        lw = None if node.loss_weight is None else node.loss_weight[np.flatnonzero(node.decision)]
        for r in node.decision_rollouts:
            if (y, r) not in seg:
                continue
            b, sd = base(y, r), scale(y, r)
            a = (credit.returns[node.id][r] - b) / (sd + eps if std else 1.0)
            w = credit.mass[(y, r)] * (fit * share[y] / seg[(y, r)] if loss_agg == "seq_mean_token_mean" else 1.0)
            toks.append(q)
            rols.append(np.full(len(q), index[r]))
            advs.append(np.full(len(q), a))
            wts.append(np.full(len(q), w) if lw is None else w * lw.astype(np.float64))
    cat = (lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt))
    rows = (cat(toks, np.int64), cat(rols, np.int32), cat(advs, np.float64), cat(wts, np.float64))
    totals = {r: (c - base(0, r)) / (scale(0, r) + eps if std else 1.0) for r, (c, _) in credit.at_root.items()}
    return _finish("tree_grpo", tree, ids, rows, None, None, float(norm), credit.value, totals)


def _segment_tokens(tree: PrefixTree, credit: TreeCredit) -> dict[tuple[int, str], int]:
    """(upper point, draw) -> decision tokens the draw sampled below that point (its segment)."""
    seg: dict[tuple[int, str], int] = {}
    for node in tree.nodes:
        d = int(node.decision.sum())
        y = int(credit.upper[node.id])
        for r in node.decision_rollouts if d else ():
            if (y, r) in credit.mass and r in credit.returns.get(node.id, {}):
                seg[(y, r)] = seg.get((y, r), 0) + d
    return seg


def _segment_share(seg: dict[tuple[int, str], int], n_decision: dict[str, int]) -> dict[int, float]:
    """Point -> the mean over its draws of the share of a draw's decision tokens that lie in its
    segment below the point: what seq_mean_token_mean gives those tokens per draw in grpo (1 per
    rollout, over all its tokens), on average, so that a branched group weighs about what it would
    unbranched; equal for every draw at a point, so the zero sum holds (1 without branches)."""
    per: dict[int, list[float]] = {}
    for (y, r), n in seg.items():
        per.setdefault(y, []).append(n / max(n_decision.get(r, n), n))
    return {y: float(np.mean(v)) for y, v in per.items()}


def _baselines(credit: TreeCredit, harness: dict[str, str], per_harness: bool
               ) -> tuple[Callable[[int, str], float], Callable[[int, str], float]]:
    """(point, draw) -> baseline V(point), and -> the scale of the point's start: the on-policy std
    at the root (per harness with ``per_harness``, the baseline too), an orphan start's own."""
    root: dict[str, tuple[float, float]] = {}
    if per_harness:
        by_h: dict[str, list[tuple[float, float]]] = {}
        for r, m in credit.at_root.items():
            by_h.setdefault(harness[r], []).append(m)
        root = {h: (float(np.mean([m[0] for m in ms])), float(np.mean([m[1] for m in ms]))) for h, ms in by_h.items()}

    def moments(x: int, r: str) -> tuple[float, float]:
        if x == 0 and per_harness and harness.get(r) in root:
            return root[harness[r]]
        return float(credit.value[x]), float(credit.second[x])

    def base(y: int, r: str) -> float:
        return moments(y, r)[0]

    def scale(y: int, r: str) -> float:
        v, s2 = moments(credit.start.get(y, 0), r)
        return float(np.sqrt(max(s2 - v * v, 0.0)))

    return base, scale


def gae(tree: PrefixTree, values: np.ndarray, *, gamma: float = 1.0, lam: float = 1.0,
        token_rewards: np.ndarray | None = None, reward_norm: RewardNorm = "none",
        per_harness: bool = False, loss_agg: str = "seq_mean_token_mean") -> TokenAdvantages:
    """Token-level GAE along every kept root-to-end path (see module docstring)."""
    flat = tree.flat()
    values = np.asarray(values, dtype=np.float64)
    if values.shape != (len(flat),):
        raise ValueError(f"gae: values must have one entry per tree token ({len(flat)}), got {values.shape}")
    if token_rewards is not None:
        token_rewards = np.asarray(token_rewards, dtype=np.float64)
        if token_rewards.shape != (len(flat),):
            raise ValueError(f"gae: token_rewards must have shape ({len(flat)},), got {token_rewards.shape}")
    rewards, harness = _kept_rewards(tree)
    rewards = normalize_rewards(rewards, harness, _mode(reward_norm, per_harness), per_harness)
    w, norm = rollout_weights(decision_counts(tree), loss_agg)
    ids = tuple(tree.kept_rollouts())
    index = {r: i for i, r in enumerate(ids)}
    paths_through = _paths_through_nodes(tree, set(w))
    token_w = _token_weights(tree)
    toks, rols, pths, advs, wts, rets = [], [], [], [], [], []
    for path in tree.paths:
        if path.rollout_id not in w:
            continue
        q = np.concatenate([flat.node_offsets[n] + np.flatnonzero(tree.nodes[n].decision) for n in path.nodes
                            if path.rollout_id in tree.nodes[n].decision_rollouts] or [np.zeros(0, np.int64)])
        if not len(q):
            continue
        tok_r = token_rewards[q] if token_rewards is not None else np.zeros(len(q))
        adv = gae_1d(values[q], tok_r, rewards[path.rollout_id], gamma, lam)
        m = np.array([paths_through[(int(n), path.rollout_id)] for n in flat.node_index[q]], dtype=np.float64)
        toks.append(q)
        rols.append(np.full(len(q), index[path.rollout_id]))
        pths.append(np.full(len(q), path.index))
        advs.append(adv)
        wts.append(w[path.rollout_id] / m * token_w[q])
        rets.append(adv + values[q])
    cat = (lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt))
    rows = (cat(toks, np.int64), cat(rols, np.int32), cat(advs, np.float64), cat(wts, np.float64))
    return _finish("ppo", tree, ids, rows, cat(pths, np.int32), cat(rets, np.float64), norm,
                   None, None)


def _token_weights(tree: PrefixTree) -> np.ndarray:
    """float64 [tree tokens]: each token's loss weight (Node.loss_weight; 1 where a node has none)."""
    return np.concatenate([np.ones(len(n)) if n.loss_weight is None else n.loss_weight.astype(np.float64)
                           for n in tree.nodes]) if tree.nodes else np.zeros(0)


def gae_1d(values: np.ndarray, token_rewards: np.ndarray, final_reward: float, gamma: float,
           lam: float) -> np.ndarray:
    """GAE over one sequence of decision tokens (terminal after the last one)."""
    v = values.tolist()
    r = token_rewards.tolist()
    r[-1] += final_reward
    out = [0.0] * len(v)
    last, next_v = 0.0, 0.0
    for k in range(len(v) - 1, -1, -1):
        delta = r[k] + gamma * next_v - v[k]
        last = delta + gamma * lam * last
        out[k] = last
        next_v = v[k]
    return np.array(out, dtype=np.float64)


def _paths_through_nodes(tree: PrefixTree, rollouts: set[str]) -> dict[tuple[int, str], int]:
    """(node, rollout) -> number of that rollout's paths through the node."""
    counts: dict[tuple[int, str], int] = {}
    for path in tree.paths:
        if path.rollout_id in rollouts:
            for n in path.nodes:
                key = (n, path.rollout_id)
                counts[key] = counts.get(key, 0) + 1
    return counts


def _finish(name: str, tree: PrefixTree, ids: tuple[str, ...], rows: Rows, path: np.ndarray | None,
            returns: np.ndarray | None, norm: float, node_value: np.ndarray | None,
            rollout_adv: dict[str, float] | None) -> TokenAdvantages:
    tok, rol, adv, wt = rows
    if path is None:
        path = np.full(len(tok), -1, dtype=np.int32)
    parts = assemble(len(tree.flat()), tok.astype(np.int64), rol, path, adv, wt, returns)
    return TokenAdvantages(
        estimator=name, rollout_ids=ids, norm=norm,
        node_value=None if node_value is None else node_value.astype(np.float32),
        rollout_adv=rollout_adv, **parts)


# The estimators by their config name (algorithm.name): `ppo` is GAE over the critic's values.
ESTIMATORS = {"grpo": grpo, "tree_grpo": tree_grpo, "ppo": gae}
