"""Token losses for tree-packed PPO / GRPO (torch; algo/ stays torch-free).

Every function takes per-token tensors aligned to the decision tokens of a packed chunk.

Exact clipping on shared tokens. A tree token lies on several root-to-leaf paths, each with its
own advantage A_i (times its normalisation weight w_i) but one ratio r. The per-path PPO
objective min(r A, clip(r) A) is linear in A once the sign of A is fixed, so

    sum_i w_i min(r A_i, clip(r) A_i) = A+ * min(r, clip(r)) + A- * max(r, clip(r))

with A+ / A- the weighted sums of the positive / negative path advantages (docs/training.md).
Dual clip (Ye et al. 2020) bounds the negative branch: A- * min(max(r, clip(r)), c). Summing
advantages before clipping would not be exact; this form is.

Departures / choices:
- pi_old is the trainer's policy before the update (one forward with no grad, or the detached
  logprob itself when there is a single epoch, so r == 1 with a non-zero gradient).
- Train-inference mismatch: TIS multiplies the clipped token objective by
  min(exp(logp_old - logp_engine), cap) (detached); MIS drops tokens whose ratio leaves
  [lo, hi] from the numerator and the denominator.
- KL to a frozen reference uses the k3 estimator exp(ref - logp) - (ref - logp) - 1; the
  trainer/engine mismatch is logged the same way as KL(engine || trainer) (`mismatch_kl`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from harnessrl.train.settings import PPOSettings
from harnessrl.train.update_stats import TokenSums

__all__ = ["PPOSettings", "clipped_objective", "importance_weights", "kl_k3", "policy_loss", "value_loss"]


def clipped_objective(
    ratio: torch.Tensor, adv_pos: torch.Tensor, adv_neg: torch.Tensor, s: PPOSettings
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token PPO objective summed over the paths through the token, and a clipped flag."""
    clipped = ratio.clamp(1.0 - s.clip_low, 1.0 + s.clip_high)
    pos_term = torch.minimum(ratio, clipped)
    neg_term = torch.maximum(ratio, clipped)
    if s.dual_clip is not None:
        neg_term = torch.clamp(neg_term, max=s.dual_clip)
    obj = adv_pos * pos_term + adv_neg * neg_term
    active = ((adv_pos > 0) & (ratio > 1.0 + s.clip_high)) | ((adv_neg < 0) & (ratio < 1.0 - s.clip_low))
    return obj, active


def importance_weights(
    old_logp: torch.Tensor, engine_logp: torch.Tensor, s: PPOSettings
) -> tuple[torch.Tensor, torch.Tensor]:
    """(weight, keep) per token for the trainer/engine mismatch; both detached."""
    ratio = torch.exp(old_logp.detach() - engine_logp)
    keep = torch.ones_like(ratio, dtype=torch.bool)
    if s.is_mode == "tis":
        return ratio.clamp(max=s.is_cap), keep
    if s.is_mode == "mis":
        keep = (ratio >= s.mis_low) & (ratio <= s.mis_high)
        return torch.ones_like(ratio), keep
    if s.is_mode == "none":
        return torch.ones_like(ratio), keep
    raise ValueError(f"unknown is_mode {s.is_mode!r}: use tis, mis or none")


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(pi || ref) (non-negative, unbiased)."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1.0


def mismatch_kl(trainer_logp: torch.Tensor, engine_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(engine || trainer) on tokens the engine sampled.

    With r = p_trainer / p_engine and x ~ engine: E[r - 1 - log r] = KL(engine || trainer), and
    every term is >= 0 (prime-rl trusts a model below 0.015)."""
    d = trainer_logp - engine_logp
    return torch.exp(d) - d - 1.0


@dataclass
class LossParts:
    """Sums over a chunk's tokens (divide by the batch denominator to get means)."""

    loss: torch.Tensor  # the differentiable numerator
    sums: TokenSums  # path-weighted sums of the chunk's statistics (entropy and loss: the trainer's)


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    engine_logp: torch.Tensor,
    adv_pos: torch.Tensor,
    adv_neg: torch.Tensor,
    weight: torch.Tensor,
    s: PPOSettings,
    ref_logp: torch.Tensor | None = None,
) -> LossParts:
    """Negative PPO objective (+ KL) summed over tokens; `weight` = summed path weights per token.

    The returned sums are weighted by path weight, to be divided by the summed weight.
    """
    ratio = torch.exp(logp - old_logp.detach())
    obj, active = clipped_objective(ratio, adv_pos, adv_neg, s)
    isw, keep = importance_weights(old_logp, engine_logp, s)
    keepf = keep.float()
    loss = -(obj * isw * keepf).sum()
    kl = torch.zeros((), device=logp.device)
    if ref_logp is not None:
        kl_tok = kl_k3(logp, ref_logp)
        kl = (kl_tok * weight * keepf).sum()
        if s.kl_coef:
            loss = loss + s.kl_coef * kl
    with torch.no_grad():
        sums = TokenSums(
            clip_frac=float((active.float() * weight).sum()),
            is_weight=float((isw * weight).sum()),
            is_kept=float((keepf * weight).sum()),
            kl=float(kl),
            abs_logp_gap=float(((old_logp - engine_logp).abs() * weight).sum()),
            mismatch_kl=float((mismatch_kl(old_logp.detach(), engine_logp) * weight).sum()),
            is_capped=float(((old_logp.detach() - engine_logp > math.log(s.is_cap)).float() * weight).sum()),
            weight=float(weight.sum()),
            tokens=float(logp.numel()),
            added=1,
        )
    return LossParts(loss=loss, sums=sums)


def value_loss(values: torch.Tensor, returns: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Weighted squared error summed over tokens.

    With `returns` the weighted mean of the path returns through each token and `weight` the
    summed path weight, sum_i w_i (V - R_i)^2 = W (V - mean_w R)^2 + const, so the gradient equals
    training each path's values separately.
    """
    return (weight * (values - returns) ** 2).sum()
