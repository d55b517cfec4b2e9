"""HFEngine: the reference backend, transformers in-process with continuous batching on a KV cache.

A background worker thread owns the model. Each loop it admits waiting requests (each prefilled
alone, then merged into the running batch, see kv_batch.py), runs one batched decode step for all
running rows, samples one token per row (sampling.py: logprob = log_softmax(logits / T) of the
sampled token, float32) and resolves finished rows. Requests that arrive together therefore decode
together, and a request arriving mid-batch joins at the next step.

`generate_stream` enqueues the same request with a sink: each sampled token is handed to the
caller's loop as it is sampled (a `TokenDelta`), then the `Generation`; closing the stream early
cancels the request, which leaves the batch at the next step.

`update_weights` takes the same lock as a decode step, so new weights land between steps. A
completion that spans an update carries the version it started with (the oldest weights used).
"""

from __future__ import annotations

import asyncio
import os
import queue
import random
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import torch

from harnessrl.engine.base import (EngineError, EngineOverloaded, Generation, NamedTensors, SamplingParams, StreamItem,
                                   TokenDelta)
from harnessrl.engine.checks import fit_max_tokens, stop_ids_for, validate_prompt
from harnessrl.engine.knobs import validate_params
from harnessrl.engine.kv_batch import KVBatch
from harnessrl.engine.sampling import sample_token


@dataclass
class _Request:
    prompt_ids: list[int]
    params: SamplingParams
    max_new: int
    stop_ids: frozenset[int]
    generator: torch.Generator | None
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    enqueued: float
    started: float = 0.0
    version: int = 0
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    sink: asyncio.Queue | None = None  # a streamed request: its deltas, then its Generation or error

    def finish_reason(self) -> str | None:
        if self.token_ids and self.token_ids[-1] in self.stop_ids:
            return "stop"
        if len(self.token_ids) >= self.max_new:
            return "length"
        return None


def _resolve(req: _Request, result: Any = None, error: BaseException | None = None) -> None:
    def _set() -> None:
        if req.sink is not None:
            req.sink.put_nowait(error if error is not None else result)
        if req.future.done():
            return
        if error is not None:
            req.future.set_exception(error)
        else:
            req.future.set_result(result)

    try:
        req.loop.call_soon_threadsafe(_set)
    except RuntimeError:  # the caller's loop is closed; nobody is waiting
        pass


class HFEngine:
    """Engine protocol over a transformers causal LM (see module doc).

    `num_threads`: torch intra-op threads of the decode thread (set in that thread only). Default:
    all cores but one, like vLLM's CPU backend. On a loaded 2-core machine 1 thread measured 3-8x
    faster than 2 (OpenMP barriers stall whenever one of the two threads is descheduled).
    """

    def __init__(
        self,
        model_path: str,
        *,
        dtype: str = "float32",
        max_model_len: int | None = None,
        max_batch: int = 64,
        max_pending: int = 1024,
        batch_wait_s: float = 0.005,
        seed: int = 0,
        num_threads: int | None = None,
    ):
        from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

        # like vLLM on CPU, leave one core to the rest of the process (proxy, harnesses)
        self._num_threads = num_threads or max(1, min(torch.get_num_threads(), (os.cpu_count() or 2) - 1))
        self.model_path = str(model_path)
        torch_dtype = getattr(torch, dtype) if dtype != "auto" else "auto"
        self._model = AutoModelForCausalLM.from_pretrained(self.model_path, dtype=torch_dtype).eval()
        config = self._model.config
        limit = int(getattr(config, "max_position_embeddings", 0) or 1 << 30)
        self.max_model_len = min(max_model_len or limit, limit)
        self._vocab_size = int(config.vocab_size)
        self._eos_ids = _eos_ids(self.model_path, config, AutoTokenizer, GenerationConfig)
        self._max_batch, self._max_pending, self._batch_wait_s = max_batch, max_pending, batch_wait_s
        self._seeds = random.Random(seed)
        self._version = 0
        self._lock = threading.Lock()  # model + weights; held for one step or one update
        self._queue: queue.Queue[_Request] = queue.Queue()
        self._stopping = threading.Event()
        self._worker = threading.Thread(target=self._run, name="hf-engine", daemon=True)
        self._worker.start()

    @property
    def policy_version(self) -> int:
        return self._version

    @property
    def pending(self) -> int:
        """Requests waiting for admission (not yet decoding)."""
        return self._queue.qsize()

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Generation:
        req = self._request(prompt_ids, params)
        self._queue.put(req)
        return await req.future

    async def generate_stream(self, prompt_ids: list[int], params: SamplingParams) -> AsyncIterator[StreamItem]:
        sink: asyncio.Queue = asyncio.Queue()
        req = self._request(prompt_ids, params, sink=sink)
        self._queue.put(req)
        try:
            while True:
                item = await sink.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if isinstance(item, Generation):
                    return
        finally:
            if not req.future.done():
                req.future.cancel()  # the worker drops a cancelled request at its next step

    def _request(self, prompt_ids: list[int], params: SamplingParams, sink: asyncio.Queue | None = None) -> _Request:
        """A validated request for the worker (EngineOverloaded when too many wait)."""
        if self._stopping.is_set():
            raise EngineError("engine is closed")
        validate_params(params)
        validate_prompt(prompt_ids, self._vocab_size)
        max_new = fit_max_tokens(len(prompt_ids), params, self.max_model_len)
        if self._queue.qsize() >= self._max_pending:
            raise EngineOverloaded(
                f"{self._queue.qsize()} requests already wait (max_pending={self._max_pending})"
            )
        seed = params.seed if params.seed is not None else self._seeds.getrandbits(63)
        loop = asyncio.get_running_loop()
        return _Request(
            prompt_ids=list(prompt_ids),
            params=params,
            max_new=max_new,
            stop_ids=stop_ids_for(params, self._eos_ids),
            generator=torch.Generator().manual_seed(seed) if params.temperature > 0 else None,
            future=loop.create_future(),
            loop=loop,
            enqueued=time.monotonic(),
            sink=sink,
        )

    def update_weights(self, named_tensors: NamedTensors, version: int) -> None:
        """Copy HF-named tensors into the live model between decode steps; set policy_version."""
        with self._lock:
            targets = self._model.state_dict(keep_vars=True)
            with torch.no_grad():
                for name, tensor in named_tensors:
                    if name not in targets:
                        raise KeyError(f"update_weights: unknown parameter {name!r}")
                    target = targets[name]
                    if tuple(target.shape) != tuple(tensor.shape):
                        raise ValueError(
                            f"update_weights: {name} has shape {tuple(tensor.shape)}, model has {tuple(target.shape)}"
                        )
                    target.data.copy_(torch.as_tensor(tensor))
            self._version = int(version)

    def close(self) -> None:
        self._stopping.set()
        self._worker.join(timeout=30)
        while True:
            try:
                _resolve(self._queue.get_nowait(), error=EngineError("engine closed"))
            except queue.Empty:
                break

    # ---- worker thread -------------------------------------------------------------------

    def _run(self) -> None:
        torch.set_num_threads(self._num_threads)  # per decode thread (OpenMP ICV); see the class doc
        running: list[_Request] = []
        batch: KVBatch | None = None
        while not self._stopping.is_set():
            try:
                new = self._take_new(len(running))
                with self._lock, torch.inference_mode():
                    batch, running = self._admit(new, batch, running)
                    if batch is not None:  # a batch holds exactly the running requests
                        batch, running = self._decode_step(batch, running)
            except Exception as err:  # noqa: BLE001 - fail what was in flight, keep serving
                for req in running:
                    _resolve(req, error=EngineError(f"generation failed: {err!r}"))
                batch, running = None, []
        for req in running:
            _resolve(req, error=EngineError("engine closed"))

    def _take_new(self, n_running: int) -> list[_Request]:
        room = self._max_batch - n_running
        new: list[_Request] = []
        if room <= 0:
            return new
        if n_running == 0:  # idle: block for the first request, then gather its companions
            try:
                new.append(self._queue.get(timeout=0.1))
            except queue.Empty:
                return new
            deadline = time.monotonic() + self._batch_wait_s
            while len(new) < room and (left := deadline - time.monotonic()) > 0:
                try:
                    new.append(self._queue.get(timeout=left))
                except queue.Empty:
                    break
        while len(new) < room:
            try:
                new.append(self._queue.get_nowait())
            except queue.Empty:
                break
        return new

    def _admit(
        self, new: list[_Request], batch: KVBatch | None, running: list[_Request]
    ) -> tuple[KVBatch | None, list[_Request]]:
        for req in new:
            if req.future.cancelled():
                continue
            req.started, req.version = time.monotonic(), self._version
            try:
                out = self._model(input_ids=torch.tensor([req.prompt_ids]), use_cache=True, logits_to_keep=1)
            except Exception as err:  # noqa: BLE001 - one bad request must not stop the worker
                _resolve(req, error=EngineError(f"prefill failed: {err!r}"))
                continue
            self._append_token(req, out.logits[0, -1])
            if self._finish_if_done(req):
                continue
            row = KVBatch.from_prefill(out.past_key_values, len(req.prompt_ids))
            if batch is None:
                batch = row
            else:
                batch.merge(row)
            running.append(req)
        return batch, running

    def _decode_step(self, batch: KVBatch, running: list[_Request]) -> tuple[KVBatch | None, list[_Request]]:
        last = torch.tensor([req.token_ids[-1] for req in running], dtype=torch.long)
        logits = self._model(**batch.decode_inputs(last)).logits[:, -1]
        keep: list[int] = []
        for i, req in enumerate(running):
            self._append_token(req, logits[i])
            if not self._finish_if_done(req):
                keep.append(i)
        if not keep:
            return None, []
        if len(keep) < len(running):
            batch.keep(keep)
        return batch, [running[i] for i in keep]

    def _append_token(self, req: _Request, logits: torch.Tensor) -> None:
        token, logprob = sample_token(logits, req.params, req.generator)
        req.token_ids.append(token)
        req.logprobs.append(logprob)
        if req.sink is not None:
            try:
                req.loop.call_soon_threadsafe(req.sink.put_nowait, TokenDelta([token], [logprob]))
            except RuntimeError:  # the caller's loop is closed; nobody is reading
                pass

    def _finish_if_done(self, req: _Request) -> bool:
        if req.future.cancelled():
            return True
        reason = req.finish_reason()
        if reason is None:
            return False
        now = time.monotonic()
        gen = Generation(
            token_ids=list(req.token_ids),
            logprobs=list(req.logprobs),
            finish_reason=reason,  # type: ignore[arg-type]
            policy_version=req.version,
            timings={"queue_s": req.started - req.enqueued, "gen_s": now - req.started},
        )
        _resolve(req, result=gen)
        return True


def _eos_ids(model_path: str, config: Any, tokenizer_cls: Any, generation_config_cls: Any) -> set[int]:
    """eos ids from the model config, its generation config and its tokenizer (when present)."""
    ids: set[int] = set()

    def add(value: Any) -> None:
        if isinstance(value, int):
            ids.add(value)
        elif isinstance(value, (list, tuple)):
            ids.update(int(v) for v in value)

    add(getattr(config, "eos_token_id", None))
    try:
        add(generation_config_cls.from_pretrained(model_path).eos_token_id)
    except OSError:
        pass
    try:
        add(tokenizer_cls.from_pretrained(model_path).eos_token_id)
    except (OSError, ValueError):
        pass
    return ids
