"""SGLangServerEngine: the Engine protocol over an SGLang server (`python -m sglang.launch_server`).

Generation: POST /generate (SGLang's native API) with `input_ids` (token ids in, no re-tokenising),
`sampling_params` {temperature, top_p, max_new_tokens, stop_token_ids, skip_special_tokens: false,
no_stop_trim: true} and `return_logprob: true`. The sampled ids and their logprobs come back in
`meta_info.output_token_logprobs` as [logprob, token_id, text] triples (`output_ids`, when
present, must agree); `meta_info.finish_reason.type` is "stop" or "length". SGLang computes these
logprobs after temperature scaling (log_softmax(logits / T)), the contract of Engine; a server
started with SGLANG_RETURN_ORIGINAL_LOGPROB=1 returns T=1 logprobs instead, which would be wrong here.

Weight update: from disk. The tensors are written as a safetensors checkpoint (plus the model's
config.json) into a directory the server can read (`weights_dir`, default /dev/shm: same host; on
a cluster, a shared filesystem), then POST /update_weights_from_disk {"model_path": dir} and
POST /flush_cache so no prefix computed with old weights is reused. `update_weights_from_disk(path)`
loads an existing HF checkpoint directory (e.g. the trainer's) without writing anything. SGLang's
tensor/NCCL routes (/update_weights_from_tensor, /update_weights_from_distributed) need a GPU
process group with the trainer: not used here.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from harnessrl.engine.base import EngineError, EngineOverloaded, Generation, NamedTensors, PromptTooLong, SamplingParams
from harnessrl.engine.checks import fit_max_tokens
from harnessrl.engine.knobs import validate_params


class SGLangServerEngine:
    """Engine protocol over a running SGLang server (see module doc)."""

    def __init__(self, base_url: str, *, model_path: str | None = None, max_model_len: int | None = None,
                 max_pending: int = 1024, timeout_s: float = 600.0, api_key: str | None = None,
                 weights_dir: str | None = None):
        self.base_url = base_url.rstrip("/")
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout = timeout_s
        info = self._get_json("/get_model_info")
        if not info.get("is_generation", True):
            raise EngineError(f"SGLang at {self.base_url} serves a non-generative model: {info}")
        self.model_path = model_path or str(info.get("model_path") or "sglang")
        self._server_model_path = str(info.get("model_path") or "")
        served = _context_length(self._server_info())
        limits = [x for x in (max_model_len, served) if x]
        self.max_model_len = min(limits) if limits else 4096
        self._max_pending = max_pending
        self._weights_root = weights_dir
        self._inflight = 0
        self._version = 0

    # -- HTTP helpers ----------------------------------------------------------------------------

    def _get_json(self, route: str) -> dict[str, Any]:
        try:
            resp = httpx.get(f"{self.base_url}{route}", headers=self._headers, timeout=10.0)
            resp.raise_for_status()
            return resp.json()
        except (httpx.HTTPError, ValueError) as err:
            raise EngineError(f"cannot reach SGLang at {self.base_url}{route}: {err}") from err

    def _server_info(self) -> dict[str, Any]:
        for route in ("/get_server_info", "/server_info"):  # renamed across SGLang versions
            try:
                resp = httpx.get(f"{self.base_url}{route}", headers=self._headers, timeout=10.0)
            except httpx.HTTPError:
                continue
            if resp.status_code == 200:
                return resp.json()
        return {}

    @property
    def policy_version(self) -> int:
        return self._version

    # -- generation --------------------------------------------------------------------------------

    def _body(self, prompt_ids: list[int], params: SamplingParams, max_new: int) -> dict[str, Any]:
        sp: dict[str, Any] = {"temperature": params.temperature, "top_p": params.top_p, "max_new_tokens": max_new,
                              "stop_token_ids": list(params.stop_token_ids), "skip_special_tokens": False,
                              "no_stop_trim": True}
        if params.seed is not None:
            sp["sampling_seed"] = params.seed
        return {"input_ids": list(prompt_ids), "sampling_params": sp, "return_logprob": True, "stream": False}

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Generation:
        validate_params(params)
        if not prompt_ids:
            raise ValueError("prompt_ids is empty")
        max_new = fit_max_tokens(len(prompt_ids), params, self.max_model_len)
        if self._inflight >= self._max_pending:
            raise EngineOverloaded(f"{self._inflight} requests in flight (max_pending={self._max_pending})")
        version, start = self._version, time.monotonic()
        self._inflight += 1
        try:
            try:
                async with httpx.AsyncClient(timeout=self._timeout, headers=self._headers) as client:
                    resp = await client.post(f"{self.base_url}/generate", json=self._body(prompt_ids, params, max_new))
            except httpx.HTTPError as err:
                raise EngineError(f"SGLang request failed: {err!r}") from err
        finally:
            self._inflight -= 1
        if resp.status_code in (429, 503):
            raise EngineOverloaded(f"SGLang is overloaded ({resp.status_code})")
        if resp.status_code == 400 and ("context length" in resp.text.lower() or "too long" in resp.text.lower()):
            raise PromptTooLong(len(prompt_ids), self.max_model_len)
        if resp.status_code != 200:
            raise EngineError(f"SGLang answered {resp.status_code}: {resp.text[:500]}")
        try:
            data = resp.json()
        except ValueError as err:
            raise EngineError(f"SGLang answered non-JSON: {resp.text[:300]}") from err
        return parse_generate(data, version, time.monotonic() - start)

    # -- weights -------------------------------------------------------------------------------------

    def update_weights_from_disk(self, path: str, version: int) -> None:
        """Load the HF checkpoint directory `path` (readable by the server) and set the version."""
        with httpx.Client(base_url=self.base_url, headers=self._headers, timeout=self._timeout) as client:
            try:
                resp = client.post("/update_weights_from_disk", json={"model_path": str(path)})
                if resp.status_code != 200:
                    raise EngineError(f"SGLang weight update failed ({resp.status_code}): {resp.text[:500]}")
                body = resp.json()
                if not body.get("success", False):
                    raise EngineError(f"SGLang refused the weights at {path}: {body.get('message', body)}")
                flush = client.post("/flush_cache")
                if flush.status_code != 200:
                    raise EngineError(f"SGLang flush_cache failed ({flush.status_code}): {flush.text[:300]}")
            except httpx.HTTPError as err:
                raise EngineError(f"SGLang weight update request failed: {err!r}") from err
        self._version = int(version)

    def update_weights(self, named_tensors: NamedTensors, version: int) -> None:
        """Write the tensors as an HF checkpoint the server can read, load it, delete it."""
        import torch
        from safetensors.torch import save_file

        root = self._weights_root or ("/dev/shm" if Path("/dev/shm").is_dir() else tempfile.gettempdir())
        out = Path(tempfile.mkdtemp(prefix="harnessrl-sglang-", dir=root))
        try:
            tensors = {k: torch.as_tensor(v).detach().to("cpu").contiguous().clone() for k, v in named_tensors}
            if not tensors:
                raise ValueError("update_weights got no tensors")
            save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
            for src in (self.model_path, self._server_model_path):
                cfg = Path(src) / "config.json" if src else None
                if cfg is not None and cfg.is_file():
                    shutil.copy2(cfg, out / "config.json")
                    break
            self.update_weights_from_disk(str(out), version)
        finally:
            shutil.rmtree(out, ignore_errors=True)

    def close(self) -> None:
        pass


def _context_length(info: dict[str, Any]) -> int | None:
    for key in ("context_length", "max_model_len"):
        v = info.get(key)
        if isinstance(v, int) and v > 0:
            return v
    return None


def parse_generate(data: Any, version: int, elapsed: float) -> Generation:
    """A Generation from SGLang's /generate JSON (a single prompt: an object, or a one-item list)."""
    if isinstance(data, list) and len(data) == 1:
        data = data[0]
    try:
        meta = data["meta_info"]
        triples = meta["output_token_logprobs"]
        token_ids = [int(t[1]) for t in triples]
        logprobs = [float(t[0]) for t in triples]
        reason = meta["finish_reason"]["type"] if isinstance(meta["finish_reason"], dict) else meta["finish_reason"]
    except (KeyError, IndexError, TypeError, ValueError) as err:
        raise EngineError(f"unexpected SGLang /generate response: {str(data)[:300]}") from err
    out_ids = [int(t) for t in data.get("output_ids") or []]
    if out_ids and token_ids and out_ids[-len(token_ids):] != token_ids:
        raise EngineError("SGLang output_ids and output_token_logprobs disagree")
    if reason not in ("stop", "length"):
        raise EngineError(f"SGLang finished with {meta['finish_reason']!r} (expected stop or length)")
    return Generation(token_ids, logprobs, reason, version, timings={"gen_s": elapsed})


def sglang_launch_command(model_path: str, *, port: int, dtype: str = "bfloat16", context_length: int = 4096,
                          mem_fraction: float | None = None, device: str | None = None) -> list[str]:
    """argv for an SGLang server SGLangServerEngine can drive (weight updates from disk included)."""
    import sys

    argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", model_path, "--host", "127.0.0.1",
            "--port", str(port), "--dtype", dtype, "--context-length", str(context_length)]
    if mem_fraction is not None:
        argv += ["--mem-fraction-static", str(mem_fraction)]
    if device is not None:
        argv += ["--device", device]
    return argv
