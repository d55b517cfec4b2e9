"""EngineConfig (pydantic) and make_engine: builds a backend with lazy imports (torch/vLLM load only
when that backend is built)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from harnessrl.engine.base import Engine


FALLBACK_MAX_MODEL_LEN = 4096  # when a model's config names no window


# The engine types, each named once; every list of them is derived from these.
ServerEngineType = Literal["vllm_server", "sglang_server"]  # clients of running servers (base_url / base_urls)
TrainableEngineType = Literal["auto", "hf", "vllm", ServerEngineType]  # engines a training run can update
EngineType = Literal[TrainableEngineType, "scripted"]  # scripted: a fixed policy, no weights (tests, smoke runs)
ENGINE_TYPES: tuple[EngineType, ...] = get_args(EngineType)
TRAINABLE_ENGINES: tuple[TrainableEngineType, ...] = get_args(TrainableEngineType)
SERVER_ENGINES: tuple[ServerEngineType, ...] = get_args(ServerEngineType)
IN_PROCESS_ENGINES: tuple[EngineType, ...] = tuple(t for t in ENGINE_TYPES if t not in SERVER_ENGINES)


class EngineSettings(BaseModel):
    """How to build an engine, less what a training run sets itself (the model it serves, a single
    server URL, a scripted policy): the run config's `engine` section. Fields a backend does not use
    are ignored by it."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    type: EngineType = Field(
        "hf", description="auto: vllm when the vllm module is importable, else hf"
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="auto: float32 for hf; vllm: bfloat16 on GPU and bf16-capable CPUs, else float32"
    )
    max_model_len: int | None = Field(
        None, ge=16, description="context limit; None: the model's own window (max_position_embeddings)"
    )
    max_batch: int = Field(64, ge=1, description="rows decoding together (hf) / max_num_seqs (vllm)")
    max_pending: int = Field(1024, ge=1, description="waiting requests before EngineOverloaded")
    kv_cache_gib: float = Field(1.0, gt=0, description="vllm on CPU: VLLM_CPU_KVCACHE_SPACE")
    kv_block_tokens: int | None = Field(
        None, ge=16, multiple_of=16,
        description="vllm: tokens per KV block, the prefix cache's unit (a prompt is served from cache up to "
                    "the last whole block it shares); None: 32 on CPU (vLLM's CPU default is 128), vLLM's own on GPU",
    )
    gpu_memory_utilization: float | None = Field(None, gt=0, le=1, description="vllm on GPU")
    prefix_caching: bool = Field(
        True, description="vllm: reuse the KV of a prompt's shared prefix (a group's system prompt, tools, task "
                          "and history); off only to measure what it saves (benchmarks/optimisations.py)",
    )
    served_model_name: str | None = Field(
        None, description="vllm_server: model name; default: ask /v1/models"
    )
    replicas: int = Field(1, ge=1, description="engine replicas behind one Engine (rollout-key affinity)")
    base_urls: list[str] | None = Field(
        None, description="vllm_server / sglang_server with replicas: one URL per replica"
    )
    seed: int = 0
    num_threads: int | None = Field(None, ge=1, description="hf: torch threads of the decode thread")
    request_timeout_s: float = Field(600.0, gt=0)

    def for_model(self, model: str, **update: Any) -> EngineConfig:
        """The EngineConfig that serves `model` with these settings (`update`: fields to replace)."""
        return EngineConfig.model_validate({**self.model_dump(), "model": model, **update})


class EngineConfig(EngineSettings):
    """How to build an engine: the settings plus the model and what only a single build sets."""

    model: str | None = Field(None, description="smollm2-135m-instruct (None), an HF dir, or a cached HF id")
    base_url: str | None = Field(None, description="vllm_server / sglang_server: e.g. http://127.0.0.1:8000")
    # scripted: outputs consumed in order, or a callable(prompt_ids) -> ids
    script: Any | None = None
    eos_ids: Sequence[int] = (2,)


def cpu_has_bf16(cpuinfo: str | None = None) -> bool:
    """Whether this CPU computes bf16 natively (AMX-BF16 or AVX512-BF16 in /proc/cpuinfo's flags);
    without either, bf16 matmuls are emulated."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return False
    flags = {f for line in cpuinfo.splitlines() if line.startswith("flags") for f in line.split(":", 1)[1].split()}
    return bool(flags & {"amx_bf16", "avx512_bf16"})


def vllm_auto_dtype() -> str:
    """vLLM's dtype for `auto`: bfloat16 on a GPU and on CPUs that compute bf16 natively; float32 on
    other CPUs. There bf16 is emulated: on this 2-core AVX2 EPYC, float32 was 4.5x faster at 12
    concurrent 450-token prompts (benchmarks/engine_throughput.py, docs/benchmarks.md), and float32
    is the trainer's own precision, so no update rounds away at a sync (docs/training.md)."""
    from vllm.platforms import current_platform

    if current_platform.is_cpu() and not cpu_has_bf16():
        return "float32"
    return "bfloat16"


def resolved_dtype(cfg: EngineSettings) -> str:
    """The dtype the engine `cfg` builds will serve in (`auto` resolved), for logs and run records."""
    kind = resolve_engine_type(cfg.type)
    if cfg.dtype != "auto" or kind not in ("hf", "vllm"):
        return cfg.dtype
    return "float32" if kind == "hf" else vllm_auto_dtype()


def resolve_engine_type(engine_type: str) -> str:
    """auto -> vllm when the vllm module is importable, else hf; any other type as it is."""
    if engine_type != "auto":
        return engine_type
    import importlib.util

    return "vllm" if importlib.util.find_spec("vllm") is not None else "hf"


def make_engine(cfg: EngineConfig | dict[str, Any]) -> Engine:
    """Build the engine described by cfg (a dict is validated into EngineConfig first)."""
    if isinstance(cfg, dict):
        cfg = EngineConfig.model_validate(cfg)
    if cfg.type == "auto":
        cfg = cfg.model_copy(update={"type": resolve_engine_type(cfg.type)})
    if cfg.replicas > 1 or cfg.base_urls:
        return _make_replicated(cfg)
    builders: dict[str, Callable[[EngineConfig], Engine]] = {
        "hf": _make_hf,
        "vllm": _make_vllm,
        "vllm_server": _make_vllm_server,
        "sglang_server": _make_sglang_server,
        "scripted": _make_scripted,
    }
    return builders[cfg.type](cfg)


def _make_hf(cfg: EngineConfig) -> Engine:
    from harnessrl.engine.hf import HFEngine
    from harnessrl.engine.model import resolve_model

    return HFEngine(
        str(resolve_model(cfg.model)),
        dtype=resolved_dtype(cfg),
        max_model_len=cfg.max_model_len,
        max_batch=cfg.max_batch,
        max_pending=cfg.max_pending,
        seed=cfg.seed,
        num_threads=cfg.num_threads,
    )


def _make_vllm(cfg: EngineConfig) -> Engine:
    from harnessrl.engine.model import model_context_window, resolve_model
    from harnessrl.engine.vllm_engine import VLLMEngine

    model_dir = resolve_model(cfg.model)
    return VLLMEngine(
        str(model_dir),
        dtype=resolved_dtype(cfg),
        max_model_len=cfg.max_model_len or model_context_window(model_dir) or FALLBACK_MAX_MODEL_LEN,
        max_num_seqs=cfg.max_batch,
        max_pending=cfg.max_pending,
        kv_cache_gib=cfg.kv_cache_gib,
        gpu_memory_utilization=cfg.gpu_memory_utilization,
        block_size=cfg.kv_block_tokens,
        prefix_caching=cfg.prefix_caching,
        seed=cfg.seed,
    )


def _make_vllm_server(cfg: EngineConfig) -> Engine:
    if not cfg.base_url:
        raise ValueError("engine type vllm_server needs base_url (e.g. http://127.0.0.1:8000)")
    from harnessrl.engine.vllm_server import VLLMServerEngine

    return VLLMServerEngine(
        cfg.base_url,
        model=cfg.served_model_name,
        model_path=cfg.model,
        max_model_len=cfg.max_model_len,
        max_pending=cfg.max_pending,
        timeout_s=cfg.request_timeout_s,
    )


def _make_sglang_server(cfg: EngineConfig) -> Engine:
    if not cfg.base_url:
        raise ValueError("engine type sglang_server needs base_url (e.g. http://127.0.0.1:30000)")
    from harnessrl.engine.sglang_server import SGLangServerEngine

    return SGLangServerEngine(cfg.base_url, model_path=cfg.model, max_model_len=cfg.max_model_len,
                              max_pending=cfg.max_pending, timeout_s=cfg.request_timeout_s)


def _make_scripted(cfg: EngineConfig) -> Engine:
    from harnessrl.engine.scripted import ScriptedEngine

    if cfg.script is None:
        raise ValueError("engine type scripted needs script (a list of token id lists or a callable)")
    from harnessrl.engine.model import model_context_window

    window = cfg.max_model_len or model_context_window(cfg.model) or 8192
    return ScriptedEngine(cfg.script, max_model_len=window, eos_ids=cfg.eos_ids)


def _make_replicated(cfg: EngineConfig) -> Engine:
    """`replicas` engines of one type behind a ReplicatedEngine. Server backends take one URL per
    replica from base_urls; in-process backends get seeds seed, seed+1, ... (distinct samples)."""
    from harnessrl.engine.replicas import ReplicatedEngine

    urls = cfg.base_urls or []
    if urls and len(urls) != cfg.replicas and cfg.replicas != 1:
        raise ValueError(f"engine replicas={cfg.replicas} but {len(urls)} base_urls were given")
    n = len(urls) or cfg.replicas
    one = {"replicas": 1, "base_urls": None}
    parts = []
    try:
        for i in range(n):
            extra = {"base_url": urls[i]} if urls else {"seed": cfg.seed + i}
            parts.append(make_engine(cfg.model_copy(update={**one, **extra})))
    except BaseException:
        for e in parts:
            e.close()
        raise
    return ReplicatedEngine(parts)
