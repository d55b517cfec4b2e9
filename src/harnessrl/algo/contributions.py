"""Per-token advantage contributions on a prefix tree, in a form the trainer packs directly.

A tree token q (flat DFS index, ``PrefixTree.flat()``) carries one contribution per (rollout) or
per (path) whose separate training would put a loss on q: ``(rollout, path, adv, weight,
returns)``, stored CSR by token (``ptr[q]:ptr[q+1]``). The tree loss with per-token ratio r_q is

    L = -(1 / D) * sum_q sum_{i in q} w_i * min(r_q A_i, clip(r_q) A_i)
      = -(1 / D) * sum_q [ A+_q * min(r_q, clip(r_q)) + A-_q * max(r_q, clip(r_q)) ]

with ``adv_pos[q] = A+_q = sum_i w_i max(A_i, 0)`` and ``adv_neg[q] = A-_q = sum_i w_i min(A_i, 0)``
(exact, because min(rA, cA) = A min(r, c) for A >= 0 and A max(r, c) for A < 0), D the sum of
``norm`` over the trees of the batch. ``weight[q] = sum_i w_i`` weighs per-token terms that do not
depend on the advantage (KL, entropy, statistics); ``ret_mean[q]`` (weighted mean return) with
``weight[q]`` gives the exact value-loss gradient: sum_i w_i (V - R_i)^2 = W (V - mean_w R)^2 + c.

Loss aggregation (``loss_agg``) sets w and the tree's share D of the denominator:
- ``"seq_mean_token_mean"``: w = 1 / n_r (n_r = decision tokens of rollout r, each tree token
  once however many branches it spans), D += number of kept rollouts with n_r > 0.
- ``"token_mean"``: w = 1, D += sum_r n_r.
- ``"seq_sum"`` (Dr.GRPO): w = 1, D += number of kept rollouts (constant length normaliser).
Normalisation is per rollout, never per row: a rollout that split into several branches weighs
what it would weigh unsplit. Per-path estimators (GAE) split w_r evenly over the rollout's paths
through each token, so every (rollout, token) pair sums to w_r.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TypedDict

import numpy as np

from harnessrl.tree.nodes import PrefixTree

LOSS_AGGS = ("seq_mean_token_mean", "token_mean", "seq_sum")


@dataclass(frozen=True)
class TokenAdvantages:
    estimator: str
    rollout_ids: tuple[str, ...]  # index space of ``rollout``
    ptr: np.ndarray  # int64 [N+1]: contributions of flat token q are ptr[q]:ptr[q+1]
    rollout: np.ndarray  # int32 [M]
    path: np.ndarray  # int32 [M], -1 for per-rollout estimators
    adv: np.ndarray  # float32 [M]
    weight: np.ndarray  # float32 [M]
    returns: np.ndarray | None  # float32 [M] (GAE only)
    norm: float  # this tree's share of the loss denominator
    node_value: np.ndarray | None  # float32 [n_nodes]: value used by the estimator (views)
    rollout_adv: dict[str, float] | None = None  # per-rollout scalar (grpo), for views

    @property
    def n_tokens(self) -> int:
        return int(self.ptr.shape[0] - 1)

    def _segment_sum(self, values: np.ndarray) -> np.ndarray:
        token = np.repeat(np.arange(self.n_tokens), np.diff(self.ptr))
        return np.bincount(token, weights=values, minlength=self.n_tokens).astype(np.float32)

    @cached_property
    def adv_pos(self) -> np.ndarray:
        """float32 [N]: sum_i w_i max(A_i, 0)."""
        return self._segment_sum(self.weight.astype(np.float64) * np.maximum(self.adv, 0))

    @cached_property
    def adv_neg(self) -> np.ndarray:
        """float32 [N]: sum_i w_i min(A_i, 0)."""
        return self._segment_sum(self.weight.astype(np.float64) * np.minimum(self.adv, 0))

    @cached_property
    def weight_sum(self) -> np.ndarray:
        """float32 [N]: sum_i w_i (0 on context tokens)."""
        return self._segment_sum(self.weight.astype(np.float64))

    @cached_property
    def adv_mean(self) -> np.ndarray:
        """float32 [N]: weighted mean advantage (nan where no contribution); for views."""
        w = self.weight_sum
        s = self._segment_sum(self.weight.astype(np.float64) * self.adv)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(w > 0, s / w, np.nan).astype(np.float32)

    @cached_property
    def ret_mean(self) -> np.ndarray:
        """float32 [N]: weighted mean return (nan where none): the value-loss target."""
        if self.returns is None:
            raise ValueError(f"{self.estimator} advantages carry no returns (use ppo)")
        w = self.weight_sum
        s = self._segment_sum(self.weight.astype(np.float64) * self.returns)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(w > 0, s / w, np.nan).astype(np.float32)

    def token_contributions(self, q: int) -> list[tuple[str, int, float, float]]:
        """(rollout id, path, advantage, weight) of every contribution on flat token q."""
        sl = slice(int(self.ptr[q]), int(self.ptr[q + 1]))
        return [(self.rollout_ids[r], int(p), float(a), float(w)) for r, p, a, w in
                zip(self.rollout[sl], self.path[sl], self.adv[sl], self.weight[sl])]


def rollout_weights(n_decision: dict[str, int], loss_agg: str) -> tuple[dict[str, float], float]:
    """Per-rollout weight w_r and the tree's denominator share D (see module docstring)."""
    if loss_agg not in LOSS_AGGS:
        raise ValueError(f"unknown loss_agg {loss_agg!r}: use one of {', '.join(LOSS_AGGS)}")
    active = {r: n for r, n in n_decision.items() if n > 0}
    if loss_agg == "seq_mean_token_mean":
        return {r: 1.0 / n for r, n in active.items()}, float(len(active))
    if loss_agg == "token_mean":
        return {r: 1.0 for r in active}, float(sum(active.values()))
    return {r: 1.0 for r in active}, float(len(active))


def decision_counts(tree: PrefixTree) -> dict[str, int]:
    """Kept rollout -> number of tokens it sampled in trainable calls (each tree token once)."""
    counts = {r: 0 for r in tree.kept_rollouts()}
    for node in tree.nodes:
        d = int(node.decision.sum())
        if d:
            for r in node.decision_rollouts:
                if r in counts:
                    counts[r] += d
    return counts


class Assembled(TypedDict):
    """Contribution rows sorted by token, with the CSR pointer (the arrays of TokenAdvantages)."""

    ptr: np.ndarray
    rollout: np.ndarray
    path: np.ndarray
    adv: np.ndarray
    weight: np.ndarray
    returns: np.ndarray | None


def assemble(n_tokens: int, token: np.ndarray, rollout: np.ndarray, path: np.ndarray, adv: np.ndarray,
             weight: np.ndarray, returns: np.ndarray | None) -> Assembled:
    """Sort contribution rows by token (stable) and build the CSR pointer."""
    order = np.argsort(token, kind="stable")
    counts = np.bincount(token, minlength=n_tokens) if len(token) else np.zeros(n_tokens, np.int64)
    ptr = np.zeros(n_tokens + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return {
        "ptr": ptr, "rollout": rollout[order].astype(np.int32), "path": path[order].astype(np.int32),
        "adv": adv[order].astype(np.float32), "weight": weight[order].astype(np.float32),
        "returns": None if returns is None else returns[order].astype(np.float32),
    }


def whiten(items: Sequence[TokenAdvantages], eps: float = 1e-6) -> list[TokenAdvantages]:
    """Whiten advantages over all contributions of a batch of trees (weighted mean and std)."""
    if not items:
        return []
    adv = np.concatenate([t.adv for t in items]).astype(np.float64)
    w = np.concatenate([t.weight for t in items]).astype(np.float64)
    if w.sum() <= 0:
        return list(items)
    mean = float((w * adv).sum() / w.sum())
    std = float(np.sqrt((w * (adv - mean) ** 2).sum() / w.sum()))
    return [replace(t, adv=((t.adv - mean) / (std + eps)).astype(np.float32)) for t in items]
