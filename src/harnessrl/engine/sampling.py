"""Token sampling shared by the in-process backends, and the logprob convention of harnessrl.

Convention (the trainer computes exactly this): the logprob of a sampled token is
`log_softmax(logits / T)[token]`, computed in float32 over the full vocabulary. top_p only
restricts which tokens may be drawn; it does not renormalise the reported logprob. T == 0
means greedy (argmax) and the logprob is taken under T = 1, i.e. `log_softmax(logits)[token]`.
"""

from __future__ import annotations

import torch

from harnessrl.engine.base import SamplingParams


def token_logprobs(logits: torch.Tensor, token_ids: torch.Tensor, temperature: float) -> torch.Tensor:
    """log_softmax(logits / T) gathered at token_ids (T <= 0 -> T = 1); logits [..., V], ids [...]."""
    scale = temperature if temperature > 0 else 1.0
    logp = torch.log_softmax(logits.float() / scale, dim=-1)
    return logp.gather(-1, token_ids.long().unsqueeze(-1)).squeeze(-1)


def sample_token(
    logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None
) -> tuple[int, float]:
    """Draw one token from a [V] logits row; returns (token id, logprob per the module convention)."""
    logits = logits.float()
    if params.temperature <= 0:
        token = int(torch.argmax(logits))
        return token, float(torch.log_softmax(logits, dim=-1)[token])
    logp = torch.log_softmax(logits / params.temperature, dim=-1)
    probs = logp.exp()
    if params.top_p < 1.0:
        probs = _top_p_filter(probs, params.top_p)
    token = int(torch.multinomial(probs, 1, generator=generator))
    return token, float(logp[token])


def _top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Zero out the tail outside the smallest set of tokens whose mass reaches top_p (keeps >= 1)."""
    sorted_probs, order = torch.sort(probs, descending=True)
    mass_before = torch.cumsum(sorted_probs, dim=0) - sorted_probs
    sorted_probs = torch.where(mass_before < top_p, sorted_probs, torch.zeros_like(sorted_probs))
    filtered = torch.zeros_like(probs)
    filtered.scatter_(0, order, sorted_probs)
    return filtered
