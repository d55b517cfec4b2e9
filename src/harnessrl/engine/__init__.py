"""Token-in-token-out engines. Importing this package loads no torch/transformers/vLLM; the heavy
backends (HFEngine, VLLMEngine, VLLMServerEngine) are imported on first attribute access."""

from __future__ import annotations

from typing import Any

from harnessrl.engine.base import (
    Engine,
    EngineError,
    EngineOverloaded,
    FinishReason,
    Generation,
    PromptTooLong,
    SamplingParams,
)
from harnessrl.engine.factory import EngineConfig, EngineSettings, make_engine
from harnessrl.engine.model import DEFAULT_MODEL, ModelNotFound, make_tiny_model, resolve_model
from harnessrl.engine.scripted import FixedLatencyEngine, ScriptedEngine

_LAZY = {
    "HFEngine": "harnessrl.engine.hf",
    "VLLMEngine": "harnessrl.engine.vllm_engine",
    "VLLMServerEngine": "harnessrl.engine.vllm_server",
    "SGLangServerEngine": "harnessrl.engine.sglang_server",
}

__all__ = [
    "DEFAULT_MODEL",
    "Engine",
    "EngineConfig",
    "EngineSettings",
    "EngineError",
    "EngineOverloaded",
    "FinishReason",
    "FixedLatencyEngine",
    "Generation",
    "HFEngine",
    "ModelNotFound",
    "PromptTooLong",
    "SamplingParams",
    "SGLangServerEngine",
    "ScriptedEngine",
    "VLLMEngine",
    "VLLMServerEngine",
    "make_engine",
    "make_tiny_model",
    "resolve_model",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'harnessrl.engine' has no attribute {name!r}")
