"""A training batch: the trees of one step concatenated into one forest with per-token fields.

Per-token fields are aligned with the forest (DFS order, tree after tree):
- decision / temperature / engine_logp from the tree (what the engine sampled, at which T);
- adv_pos / adv_neg: weighted sums of the positive / negative path (rollout) advantages through
  the token, and weight: the summed normalisation weights of those paths (losses.py explains why
  this makes PPO clipping exact on shared tokens);
- returns / value_weight for the critic (weighted mean return over the paths through the token).

Per tree: `tree_offsets` (where each tree starts) and `tree_harness` (the harness whose group the
tree is), so the trainer can split the policy gradient by harness (train/harness_grads.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from harnessrl.train.packing import Forest

if TYPE_CHECKING:
    from harnessrl.tree.nodes import FlatTree


class BatchAdvantages(Protocol):
    """What a batch takes of one tree's advantages (algo/contributions.py `TokenAdvantages`), per
    flat token: the weighted positive and negative advantage sums, the weight sum, and with
    `returns` (ppo) the critic's target `ret_mean`; `norm` is the tree's share of the denominator."""

    @property
    def adv_pos(self) -> np.ndarray: ...
    @property
    def adv_neg(self) -> np.ndarray: ...
    @property
    def weight_sum(self) -> np.ndarray: ...
    @property
    def returns(self) -> np.ndarray | None: ...
    @property
    def ret_mean(self) -> np.ndarray: ...
    @property
    def norm(self) -> float: ...


@dataclass
class TrainBatch:
    forest: Forest
    decision: np.ndarray  # bool [N]
    temperature: np.ndarray  # float32 [N]
    engine_logp: np.ndarray  # float32 [N] (nan on context)
    adv_pos: np.ndarray
    adv_neg: np.ndarray
    weight: np.ndarray
    tree_offsets: np.ndarray  # int64 [n_trees + 1]
    returns: np.ndarray | None = None
    value_weight: np.ndarray | None = None
    path_tokens: int = 0  # tokens if every path were trained as its own sequence
    denom: float | None = None  # loss denominator (sum of the trees' norms); None: summed weight
    tree_harness: list[str] | None = None  # the harness of each tree (None: not known)

    def __len__(self) -> int:
        return len(self.forest)

    def harness_codes(self) -> tuple[list[str], np.ndarray]:
        """(the batch's harnesses, sorted; per token the index into them of its tree's harness)."""
        if self.tree_harness is None:
            raise ValueError("the batch does not know its trees' harnesses (concat_batch(..., harnesses=...))")
        if len(self.tree_harness) != len(self.tree_offsets) - 1:
            raise ValueError(f"{len(self.tree_harness)} tree harnesses for {len(self.tree_offsets) - 1} trees")
        names = sorted(set(self.tree_harness))
        per_tree = np.asarray([names.index(h) for h in self.tree_harness], dtype=np.int64)
        return names, np.repeat(per_tree, np.diff(self.tree_offsets))

    @property
    def n_decision(self) -> int:
        return int(self.decision.sum())


def forest_of_flat(flat: FlatTree) -> Forest:
    """A Forest from a tree's FlatTree (tokens + parent_index), checked for DFS order."""
    return Forest(np.asarray(flat.tokens, dtype=np.int64), np.asarray(flat.parent_index, dtype=np.int64))


def concat_batch(flats: Sequence[FlatTree], advs: Sequence[BatchAdvantages], path_tokens: int = 0, harnesses: list[str] | None = None) -> TrainBatch:
    """Concatenate trees' FlatTree arrays and algo TokenAdvantages into one batch forest.

    `advs[i]` needs adv_pos, adv_neg, weight_sum and norm (algo.contributions.TokenAdvantages);
    with `returns` (gae) the critic targets ret_mean / weight_sum come along. `harnesses[i]`: the
    harness of tree i (`PrefixTree.harness`).
    """
    if not flats:
        raise ValueError("a train batch needs at least one tree")
    if harnesses is not None and len(harnesses) != len(flats):
        raise ValueError(f"{len(harnesses)} harnesses for {len(flats)} trees")
    sizes = [len(f.tokens) for f in flats]
    offsets = np.zeros(len(flats) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    parents = np.concatenate([np.where(f.parent_index >= 0, f.parent_index + off, -1)
                              for f, off in zip(flats, offsets)]).astype(np.int64)
    decision = np.concatenate([np.asarray(f.decision, dtype=bool) for f in flats]) & (parents >= 0)

    def cat(arrs: Sequence[np.ndarray]) -> np.ndarray:
        return np.concatenate([np.asarray(a, dtype=np.float32) for a in arrs])

    weight = cat([a.weight_sum for a in advs])
    has_v = all(a.returns is not None for a in advs)
    returns = np.nan_to_num(cat([a.ret_mean for a in advs])) if has_v else None
    return TrainBatch(
        forest=Forest(np.concatenate([np.asarray(f.tokens, dtype=np.int64) for f in flats]), parents),
        decision=decision,
        temperature=cat([f.temperature for f in flats]),
        engine_logp=np.nan_to_num(cat([f.engine_logprobs for f in flats])),
        adv_pos=cat([a.adv_pos for a in advs]) * decision,
        adv_neg=cat([a.adv_neg for a in advs]) * decision,
        weight=weight * decision,
        tree_offsets=offsets,
        returns=returns,
        value_weight=weight * decision if has_v else None,
        path_tokens=path_tokens,
        denom=float(sum(a.norm for a in advs)),
        tree_harness=None if harnesses is None else list(harnesses),
    )
