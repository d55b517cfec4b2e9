"""Engine data parallelism: N engine replicas behind one Engine.

Routing: a request that carries `SamplingParams.route_key` (the proxy sets the rollout id) goes to
the replica chosen by rendezvous hashing of that key, so every call of one rollout hits the same
replica and its prefix cache (the conversation grows turn by turn); the choice needs no table and
moves only the keys of a replica that is added or removed. A request without a key goes to the
replica with the fewest requests in flight.

Weights: `update_weights` loads the same tensors into every replica (in parallel threads) and
`policy_version` is the minimum over replicas, so the version advances only when all replicas
have it. Each Generation still carries the version of the replica that produced it, which is what
the store records per call. A replica that fails its update raises EngineError naming it; the
others keep the new weights and the reported version stays the old one until a retry succeeds.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from harnessrl.engine.base import (Engine, EngineError, Generation, NamedTensors, SamplingParams, StreamItem,
                                   stream_generation)


def rendezvous(key: str, n: int) -> int:
    """The replica index in [0, n) with the highest hash of (key, index)."""
    def score(i: int) -> bytes:
        return hashlib.blake2b(f"{i}\x00{key}".encode(), digest_size=8).digest()

    return max(range(n), key=score)


class ReplicatedEngine:
    """The Engine protocol over several replicas (any backends with the same model)."""

    def __init__(self, replicas: Sequence[Engine]):
        if not replicas:
            raise ValueError("ReplicatedEngine needs at least one replica")
        self.replicas = list(replicas)
        self.model_path = self.replicas[0].model_path
        self.max_model_len = min(int(r.max_model_len) for r in self.replicas)
        self.inflight = [0] * len(self.replicas)
        self.routed = [0] * len(self.replicas)  # requests sent to each replica (for metrics and tests)

    @property
    def policy_version(self) -> int:
        return min(int(r.policy_version) for r in self.replicas)

    def route(self, params: SamplingParams) -> int:
        key = getattr(params, "route_key", None)
        if key:
            return rendezvous(str(key), len(self.replicas))
        return min(range(len(self.replicas)), key=lambda i: (self.inflight[i], self.routed[i], i))

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Generation:
        i = self.route(params)
        self.inflight[i] += 1
        self.routed[i] += 1
        try:
            gen = await self.replicas[i].generate(prompt_ids, params)
        finally:
            self.inflight[i] -= 1
        timings = dict(gen.timings or {})
        timings["replica"] = float(i)
        return Generation(gen.token_ids, gen.logprobs, gen.finish_reason, gen.policy_version, timings)

    async def generate_stream(self, prompt_ids: list[int], params: SamplingParams) -> AsyncIterator[StreamItem]:
        """The routed replica's stream (base.stream_generation: one item when it does not stream)."""
        i = self.route(params)
        self.inflight[i] += 1
        self.routed[i] += 1
        try:
            async for item in stream_generation(self.replicas[i], prompt_ids, params):
                if isinstance(item, Generation):
                    item = Generation(item.token_ids, item.logprobs, item.finish_reason, item.policy_version,
                                      {**(item.timings or {}), "replica": float(i)})
                yield item
        finally:
            self.inflight[i] -= 1

    def shareable(self, named_tensors: NamedTensors) -> Any:
        """The weights in a form every replica can take (here a list; Ray: one object-store ref)."""
        return list(named_tensors)

    def update_weights(self, named_tensors: NamedTensors, version: int) -> None:
        tensors = self.shareable(named_tensors)  # every replica gets the same object
        errors: list[str] = []
        with ThreadPoolExecutor(max_workers=len(self.replicas)) as pool:
            futures = [pool.submit(r.update_weights, tensors, version) for r in self.replicas]
            for i, fut in enumerate(futures):
                try:
                    fut.result()
                except Exception as err:  # noqa: BLE001 - collected and raised together below
                    errors.append(f"replica {i}: {type(err).__name__}: {err}")
        if errors:
            raise EngineError(f"weight update to version {version} failed on {len(errors)} of "
                              f"{len(self.replicas)} replicas (policy_version stays {self.policy_version}): "
                              + "; ".join(errors))

    def close(self) -> None:
        for r in self.replicas:
            try:
                r.close()
            except Exception:  # noqa: BLE001 - close the others too
                pass
