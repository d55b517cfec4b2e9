"""The token-in-token-out engine contract shared by every backend.

An engine never sees text: prompt ids in, sampled ids + per-token logprobs out. Every result
carries the policy version of the weights that produced it. An engine may also stream
(`StreamingEngine.generate_stream`: the ids as they are sampled, then the same `Generation`);
`stream_generation` falls back to one `generate` for an engine that does not. Backends (hf, vllm, scripted) live in
sibling modules and are built by `make_engine` with lazy imports, so this module stays light.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, AsyncGenerator, AsyncIterator, Iterable, Literal, Protocol, runtime_checkable

from harnessrl.engine.knobs import DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE, DEFAULT_TOP_P
from harnessrl.errors import HarnessRLError

if TYPE_CHECKING:
    import torch

FinishReason = Literal["stop", "length"]
NamedTensors = Iterable[tuple[str, "torch.Tensor"]]  # HF parameter names and their (full, merged) tensors


class EngineError(HarnessRLError, RuntimeError):
    """Base class for engine failures the proxy turns into protocol errors."""


class EngineOverloaded(EngineError):
    """Too many requests in flight; the proxy answers 529 (Anthropic) / 503 (OpenAI) so harnesses retry."""


class PromptTooLong(EngineError):
    """prompt_ids (+ max_tokens) do not fit the model context; the proxy answers 400 'too long'."""

    def __init__(self, prompt_tokens: int, max_model_len: int):
        super().__init__(f"prompt is {prompt_tokens} tokens, the model context is {max_model_len}")
        self.prompt_tokens = prompt_tokens
        self.max_model_len = max_model_len


@dataclass(frozen=True)
class SamplingParams:
    """One call's sampling values. The proxy sets every field from its ServingPolicy
    (proxy/serving.py: sampling_params); the defaults (knobs.py's, the serving ones) serve direct
    engine callers (tests, probes) only."""

    temperature: float = DEFAULT_TEMPERATURE
    top_p: float = DEFAULT_TOP_P
    max_tokens: int = DEFAULT_MAX_TOKENS
    stop_token_ids: tuple[int, ...] = ()
    seed: int | None = None
    route_key: str | None = None  # replica affinity (the proxy sets the rollout id); not a sampling knob


@dataclass(frozen=True)
class Generation:
    """One sampled completion. `token_ids` includes the stop token when one was sampled."""

    token_ids: list[int]
    logprobs: list[float]  # one per token id, log p under the sampling distribution's model (T applied)
    finish_reason: FinishReason
    policy_version: int
    timings: dict[str, float] = field(default_factory=dict)  # e.g. queue_s, gen_s


@runtime_checkable
class Engine(Protocol):
    """What the proxy and the trainer need from an inference backend."""

    model_path: str
    max_model_len: int

    @property
    def policy_version(self) -> int: ...

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Generation:
        """Sample one completion. Concurrent callers are batched together by the backend."""
        ...

    def update_weights(self, named_tensors: NamedTensors, version: int) -> None:
        """Load new policy weights (HF parameter names) and set policy_version = version."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class TokenDelta:
    """Ids sampled since the previous delta of a stream, with their logprobs (one per id)."""

    token_ids: list[int]
    logprobs: list[float]


StreamItem = TokenDelta | Generation


@runtime_checkable
class StreamingEngine(Engine, Protocol):
    """An engine that also streams: `generate_stream` yields `TokenDelta`s as tokens are sampled and
    ends with one `Generation`, the same one `generate` would return (its ids are the deltas' ids
    concatenated). Closing the iterator early aborts the request."""

    def generate_stream(self, prompt_ids: list[int], params: SamplingParams) -> AsyncIterator[StreamItem]: ...


async def stream_generation(engine: Engine, prompt_ids: list[int],
                            params: SamplingParams) -> AsyncGenerator[StreamItem, None]:
    """The engine's stream when it streams, else one `generate` as a stream of its final item.
    Closing this generator closes the engine's stream (which aborts the request)."""
    generate_stream = getattr(engine, "generate_stream", None)
    if generate_stream is None:
        yield await engine.generate(prompt_ids, params)
        return
    items = generate_stream(prompt_ids, params)
    try:
        async for item in items:
            yield item
    finally:
        aclose = getattr(items, "aclose", None)
        if aclose is not None:
            await aclose()
