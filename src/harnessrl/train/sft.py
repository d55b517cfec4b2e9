"""Supervised fine-tuning on prefix trees: the trainer's tree packing, a cross-entropy loss.

    batch = sft_batch(trees)                  # uniform weights on the sampled tokens
    stats = sft_update(trainer, batch)        # one optimizer step; stats["nll"] = mean CE
    nll = sft_nll(trainer, batch)             # the same mean CE, no gradient

A decision token (an id the engine sampled, as recorded) weighs the number of kept rollouts that
sampled it, so the packed loss is the token-mean cross-entropy of training every rollout's
sequence separately (a shared prefix is computed once; tests/train/test_sft.py checks it).
Context tokens (prompt text, harness output) carry no loss. The loss reads logits at
temperature 1: the model's own distribution, whatever temperature the engine sampled at.
"""

from __future__ import annotations

import numpy as np
import torch

from harnessrl.train.batch import TrainBatch
from harnessrl.train.packing import Forest, model_attention, pack_forest, token_logprobs
from harnessrl.train.trainer import Trainer, chunk_targets
from harnessrl.tree.nodes import PrefixTree


def token_weights(tree: PrefixTree) -> np.ndarray:
    """float32 [N]: per flat token, the number of kept rollouts that sampled it (0 on context)."""
    kept = set(tree.kept_rollouts())
    per_node = np.array([sum(r in kept for r in n.decision_rollouts) for n in tree.nodes], dtype=np.float32)
    flat = tree.flat()
    return per_node[flat.node_index] * flat.decision


def sft_batch(trees: list[PrefixTree]) -> TrainBatch:
    """The trees as one forest with SFT weights (adv_pos = weight: advantage 1 on every sampled token)."""
    if not trees:
        raise ValueError("an SFT batch needs at least one tree")
    flats = [t.flat() for t in trees]
    sizes = [len(f.tokens) for f in flats]
    offsets = np.zeros(len(flats) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    parents = np.concatenate([np.where(f.parent_index >= 0, f.parent_index + off, -1)
                              for f, off in zip(flats, offsets)]).astype(np.int64)
    weight = np.concatenate([token_weights(t) for t in trees]).astype(np.float32) * (parents >= 0)
    decision = weight > 0
    n = len(weight)
    return TrainBatch(
        forest=Forest(np.concatenate([np.asarray(f.tokens, dtype=np.int64) for f in flats]), parents),
        decision=decision, temperature=np.ones(n, dtype=np.float32), engine_logp=np.zeros(n, dtype=np.float32),
        adv_pos=weight.copy(), adv_neg=np.zeros(n, dtype=np.float32), weight=weight, tree_offsets=offsets,
        denom=float(weight.sum()))


def _chunk_nll(trainer: Trainer, batch: TrainBatch, backward: bool) -> tuple[float, float]:
    """(summed weighted negative log-likelihood, summed weight) over the batch's chunks; with
    `backward`, the gradient of the mean is accumulated into the policy."""
    chunks = pack_forest(batch.forest, trainer.token_budget)
    denom = max(float(batch.weight.sum()), 1e-8)
    total = 0.0
    for chunk in chunks:
        tg = chunk_targets(chunk, batch)
        if len(tg.local) == 0:
            continue
        logp, _ = token_logprobs(trainer.policy, chunk, tg.local, tg.temperature, trainer.backend)
        loss = -(logp * tg.weight.to(logp.device)).sum()
        if backward:
            with model_attention(trainer.policy, trainer.backend):  # checkpointed layers recompute here
                (loss / denom).backward()
        total += float(loss.detach())
    return total, denom


def sft_update(trainer: Trainer, batch: TrainBatch) -> dict[str, float]:
    """One optimizer step on the batch's mean cross-entropy (chunked under the trainer's budget)."""
    trainer.policy.train()
    total, denom = _chunk_nll(trainer, batch, backward=True)
    grad_norm = torch.nn.utils.clip_grad_norm_([p for p in trainer.policy.parameters() if p.requires_grad],
                                               trainer.grad_clip)
    trainer.optimizer.step()
    trainer.optimizer.zero_grad(set_to_none=True)
    return {"nll": total / denom, "tokens_trained": float(batch.decision.sum()), "weight": denom,
            "grad_norm": float(grad_norm), "unique_tree_tokens": float(len(batch))}


def sft_nll(trainer: Trainer, batch: TrainBatch) -> float:
    """The batch's mean cross-entropy under the current policy (no gradient)."""
    trainer.policy.eval()
    with torch.no_grad():
        total, denom = _chunk_nll(trainer, batch, backward=False)
    return total / denom
