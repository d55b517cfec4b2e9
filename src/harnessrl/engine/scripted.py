"""Engines without a model: scripted token outputs (harness/proxy tests) and a fixed-latency stub
(proxy overhead benchmark). Both follow the Engine protocol, including PromptTooLong, max_tokens
truncation ("length") and stop ids ("stop", stop token included)."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Sequence

from harnessrl.engine.base import EngineError, Generation, NamedTensors, SamplingParams, StreamItem, TokenDelta
from harnessrl.engine.checks import fit_max_tokens, stop_ids_for


def _fit(prompt_ids: list[int], params: SamplingParams, max_model_len: int) -> int:
    if not prompt_ids:
        raise ValueError("prompt_ids is empty")
    return fit_max_tokens(len(prompt_ids), params, max_model_len)


def _cut(ids: Sequence[int], limit: int, stop_ids: frozenset[int]) -> tuple[list[int], str]:
    """Truncate at the first stop id (kept) or at limit; returns (ids, finish reason)."""
    out: list[int] = []
    for token in ids:
        if len(out) >= limit:
            return out, "length"
        out.append(int(token))
        if token in stop_ids:
            return out, "stop"
    return out, ("length" if len(out) >= limit else "stop")


class ScriptedEngine:
    """Returns fixed token id sequences.

    `script` is either a sequence of outputs consumed in order (one per generate call; EngineError
    when exhausted) or a callable(prompt_ids) -> ids. A script output that ends without a stop id
    and below max_tokens finishes with "stop" (as if an eos followed). Logprobs are `fake_logprob`.
    `generate_stream` yields the same output one token at a time, `token_delay_s` apart (an
    artificial decode time: the streaming benchmark and tests).
    `calls` keeps the last `record_calls` (prompt ids, params) asked, for assertions (bounded, so a
    long-running `serve --engine scripted` does not grow); `n_calls` counts them all.
    """

    def __init__(
        self,
        script: Sequence[Sequence[int]] | Callable[[list[int]], Sequence[int]],
        *,
        model_path: str = "scripted",
        max_model_len: int = 8192,
        eos_ids: Iterable[int] = (),
        fake_logprob: float = -0.5,
        latency_s: float = 0.0,
        record_calls: int = 1024,
        token_delay_s: float = 0.0,
    ):
        self.model_path = model_path
        self.max_model_len = max_model_len
        self._eos_ids = frozenset(eos_ids)
        self._fake_logprob = fake_logprob
        self._latency_s = latency_s
        self._token_delay_s = token_delay_s
        self._fn = script if callable(script) else None
        self._outputs: deque[list[int]] = deque() if callable(script) else deque(list(o) for o in script)
        self._lock = threading.Lock()
        self._version = 0
        self.calls: deque[tuple[list[int], SamplingParams]] = deque(maxlen=record_calls)
        self.n_calls = 0

    @property
    def policy_version(self) -> int:
        return self._version

    def _next_output(self, prompt_ids: list[int]) -> list[int]:
        if self._fn is not None:
            return list(self._fn(list(prompt_ids)))
        with self._lock:
            if not self._outputs:
                raise EngineError("ScriptedEngine: script exhausted")
            return self._outputs.popleft()

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Generation:
        gen = self._take(prompt_ids, params)
        if self._latency_s:
            await asyncio.sleep(self._latency_s)
        if self._token_delay_s:
            await asyncio.sleep(self._token_delay_s * len(gen.token_ids))
        return gen

    async def generate_stream(self, prompt_ids: list[int], params: SamplingParams) -> AsyncIterator[StreamItem]:
        gen = self._take(prompt_ids, params)
        if self._latency_s:
            await asyncio.sleep(self._latency_s)
        for token, logprob in zip(gen.token_ids, gen.logprobs):
            if self._token_delay_s:
                await asyncio.sleep(self._token_delay_s)
            yield TokenDelta([token], [logprob])
        yield gen

    def _take(self, prompt_ids: list[int], params: SamplingParams) -> Generation:
        limit = _fit(prompt_ids, params, self.max_model_len)
        self.n_calls += 1
        if self.calls.maxlen:
            self.calls.append((list(prompt_ids), params))
        ids, reason = _cut(self._next_output(prompt_ids), limit, stop_ids_for(params, self._eos_ids))
        return Generation(
            token_ids=ids,
            logprobs=[self._fake_logprob] * len(ids),
            finish_reason=reason,  # type: ignore[arg-type]
            policy_version=self._version,
        )

    def update_weights(self, named_tensors: NamedTensors, version: int) -> None:
        for _ in named_tensors:
            pass
        self._version = int(version)

    def close(self) -> None:
        pass


class FixedLatencyEngine:
    """Answers every request after `latency_s` with `n_tokens` tokens (ids cycling `token_ids`)."""

    def __init__(
        self,
        latency_s: float = 0.0,
        n_tokens: int = 16,
        *,
        token_ids: Sequence[int] = (28, 29, 30),
        model_path: str = "fixed-latency",
        max_model_len: int = 1 << 20,
    ):
        if not token_ids:
            raise ValueError("token_ids must not be empty")
        self.model_path = model_path
        self.max_model_len = max_model_len
        self._latency_s = latency_s
        self._n_tokens = n_tokens
        self._token_ids = list(token_ids)
        self._version = 0

    @property
    def policy_version(self) -> int:
        return self._version

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Generation:
        limit = _fit(prompt_ids, params, self.max_model_len)
        if self._latency_s:
            await asyncio.sleep(self._latency_s)
        n = min(self._n_tokens, limit)
        ids = [self._token_ids[i % len(self._token_ids)] for i in range(n)]
        return Generation(
            token_ids=ids,
            logprobs=[-0.1] * n,
            finish_reason="length" if n == limit else "stop",
            policy_version=self._version,
        )

    def update_weights(self, named_tensors: NamedTensors, version: int) -> None:
        self._version = int(version)

    def close(self) -> None:
        pass
