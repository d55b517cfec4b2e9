"""Request checks shared by every backend (pure python: no torch import)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from harnessrl.engine.base import PromptTooLong, SamplingParams


def stop_ids_for(params: SamplingParams, eos_ids: Iterable[int]) -> frozenset[int]:
    """Tokens that end a completion: the request's stop ids plus the model's eos ids."""
    return frozenset(int(t) for t in params.stop_token_ids) | frozenset(int(t) for t in eos_ids)


def validate_prompt(prompt_ids: list[int], vocab_size: int) -> None:
    """Raise ValueError for an empty prompt or ids outside the vocabulary."""
    if not prompt_ids:
        raise ValueError("prompt_ids is empty")
    bad = [t for t in prompt_ids if not isinstance(t, int) or t < 0 or t >= vocab_size]
    if bad:
        raise ValueError(
            f"prompt_ids hold {len(bad)} ids outside the vocabulary [0, {vocab_size}): {bad[:5]}"
        )


class AsksTokens(Protocol):
    """What a call asks of max_tokens: the engine's SamplingParams, the proxy's used values."""

    @property
    def max_tokens(self) -> int: ...


def fit_max_tokens(prompt_len: int, asked: AsksTokens, max_model_len: int) -> int:
    """`asked.max_tokens` clamped to what fits the context; PromptTooLong when not even one token fits."""
    if prompt_len + 1 > max_model_len:
        raise PromptTooLong(prompt_len, max_model_len)
    return min(asked.max_tokens, max_model_len - prompt_len)
