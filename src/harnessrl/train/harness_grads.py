"""Per-harness policy gradients of one update, and how well they agree (negative transfer).

In a mixed-harness batch the policy gradient is a sum over harnesses, g = sum_h g_h, with g_h the
gradient of harness h's share of the batch loss (the PPO terms of its trees' tokens over the batch
denominator). `HarnessGradients` splits the gradient the trainer accumulates into those g_h with
no extra forward or backward pass: the trainer packs a mixed batch so that no chunk holds two
harnesses' trees (a chunk break wherever the trees change harness, `harness_breaks`), so each
chunk's one backward is one harness's; whenever the trainer moves on to another harness's chunk
it copies the accumulated flat gradient, and the difference to the previous copy is the part of
the harness before. The loop puts each harness's trees together, so a switch happens once per
harness. The gradient the optimizer steps on is the same sum as without the split (equal within
float rounding: the chunks differ, and with them the order of the sums).

Reported per update (`UpdateStats.grad_cosine`, `.harness_grad_norm`): cos(g_a, g_b) for every
pair of harnesses, keyed "a|b" (names sorted), and |g_h|, before gradient clipping and of the
first epoch. Near +1 the harnesses push the shared weights the same way; near -1 they undo each
other's update.

Cost: up to H + 1 float32 copies of the trainable parameters' gradient on their device while the
first epoch runs (H harnesses; two harnesses: 2 copies, 1.1 GB for 135M trainable parameters), one
copy of the gradient per switch of harness, and at most one more chunk per switch (a chunk ends at the
switch instead of running on into the next harness's trees; a break at a tree's root recomputes no
prefix). Until 2026-12-07 a chunk holding two harnesses ran one backward per harness, a second
backward on about every step of a two-harness demo (docs/benchmarks.md "The update's cost").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import torch


Grads = list[torch.Tensor]  # one tensor per parameter, in the order of `HarnessGradients.params`


class HarnessGradients:
    """The accumulated gradient of `params`, split by the harness whose tokens produced it.

    Call `switch(h)` before backpropagating harness h's tokens and `finish()` after the last
    backward; `parts` then maps each harness to its gradient (float32, one tensor per parameter).
    Per parameter, never one flat vector: a flat copy (torch.cat) of a 135M-parameter gradient
    at every switch cost ~5 CPU-s an update on the 2-core box, page faults included."""

    def __init__(self, params: Sequence[torch.Tensor]):
        self.params = list(params)
        self.current: str | None = None
        self.parts: dict[str, Grads] = {}
        self._settled: Grads | None = None  # the accumulated gradient at the last switch (None: zero)

    def switch(self, harness: str) -> None:
        """What accumulates from here on is `harness`'s (what accumulated until now: the one before)."""
        if harness != self.current:
            self._settle(last=False)
            self.current = harness

    def finish(self) -> None:
        """The gradient accumulated since the last switch is the current harness's."""
        self._settle(last=True)

    def _grads(self) -> Grads:
        return [(p.grad if p.grad is not None else torch.zeros_like(p)).detach().float() for p in self.params]

    def _settle(self, last: bool) -> None:
        if self.current is None:
            return
        grads = self._grads()
        if self._settled is None:  # the first part: the gradient as it is (one copy)
            delta = [g.clone() for g in grads]
        else:
            delta = [g - s for g, s in zip(grads, self._settled)]
        if not last:  # never changed in place: the first part may be this very list
            self._settled = delta if self._settled is None else [g.clone() for g in grads]
        if self.current in self.parts:
            for part, d in zip(self.parts[self.current], delta):
                part.add_(d)
        else:
            self.parts[self.current] = delta


def gradient_agreement(parts: Mapping[str, Sequence[torch.Tensor]]) -> tuple[dict[str, float], dict[str, float]]:
    """(cosine of every pair of harness gradients, keyed "a|b" with a < b; the norm of each), each
    gradient given per parameter. A pair with a zero gradient has no cosine."""
    names = sorted(parts)
    norms = {h: sum(float(torch.linalg.vector_norm(t)) ** 2 for t in parts[h]) ** 0.5 for h in names}
    cosine = {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if norms[a] > 0 and norms[b] > 0:
                dot = sum(float(torch.dot(x.reshape(-1), y.reshape(-1))) for x, y in zip(parts[a], parts[b]))
                cosine[f"{a}|{b}"] = dot / (norms[a] * norms[b])
    return cosine, norms


def harness_breaks(tree_offsets: np.ndarray, tree_harness: Sequence[str]) -> list[int]:
    """The token indices where a batch's trees change harness (each the first token of a tree):
    the chunk breaks that keep every chunk to one harness (train/packing.py `pack_forest`)."""
    return [int(tree_offsets[i]) for i in range(1, len(tree_harness)) if tree_harness[i] != tree_harness[i - 1]]


def chunk_harness(harness: np.ndarray) -> str | None:
    """The one harness of a chunk's trained tokens (`harness[i]`: token i's; None for no tokens).
    A chunk that holds two is an error: it would put one harness's gradient into another's part."""
    present = {str(h) for h in harness}
    if len(present) > 1:
        raise ValueError(f"a chunk holds the tokens of several harnesses ({sorted(present)}): pack the "
                         "batch with a chunk break where the trees change harness (harness_breaks)")
    return next(iter(present), None)
