"""Worker-side weight loading for vLLM, installed with `worker_extension_cls`.

vLLM mixes this class into every worker (the processes that own the model, separate from the
caller). The driver writes the new weights to a safetensors file in /dev/shm (shared memory, no
disk) and calls `collective_rpc("harnessrl_load_weights", args=(path,))`; each worker memory-maps
the file and hands the tensors to the worker's `reload_weights` (vLLM's layerwise in-place reload,
which calls the model's own `load_weights`: HF names -> fused/sharded parameters). Heavy imports stay inside methods:
this module is imported by the worker process by its dotted path.

vLLM's reload warns "RotaryEmbedding: Failed to load weights" at every sync: it counts the rotary
layer's `cos_sin_cache` (a buffer it computes from the config, in no checkpoint; the HF model's
`inv_freq` is not persistent, so the sync sends no rotary tensor) as a weight to load, finds none,
and puts back the cache it had, which is the right one. `RotaryReloadNote` says so in one line at
the first sync and drops the repeats.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
import logging
from typing import Any

WORKER_EXTENSION = "harnessrl.engine.vllm_worker.HarnessRLWorkerExtension"
RELOAD_LOGGER = "vllm.model_executor.model_loader.reload.layerwise"  # where vLLM warns per layer


class RotaryReloadNote(logging.Filter):
    """vLLM's per-sync "<X>RotaryEmbedding: Failed to load weights" warning: the first one becomes
    one line that explains it (see the module docstring), the rest are dropped; every other record
    passes unchanged."""

    NOTE = ("weight sync: vLLM reports %s as 'Failed to load weights' because it counts the rotary "
            "cos_sin_cache buffer (computed from the config, in no checkpoint) as a weight; it keeps the "
            "cache it has, which is correct. Said once; the repeats are dropped (harnessrl/engine/vllm_worker.py)")

    def __init__(self) -> None:
        super().__init__()
        self.noted = False

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        if record.msg != "%s: Failed to load weights" or not args or not str(args[0]).endswith("RotaryEmbedding"):
            return True
        if self.noted:
            return False
        self.noted = True
        record.msg, record.levelno, record.levelname = self.NOTE, logging.INFO, "INFO"
        return True


def note_rotary_reload(logger: logging.Logger) -> None:
    """Install `RotaryReloadNote` on vLLM's reload logger, once per process."""
    if not any(isinstance(f, RotaryReloadNote) for f in logger.filters):
        logger.addFilter(RotaryReloadNote())


class HarnessRLWorkerExtension:
    """Methods callable through `collective_rpc` by name (self is the vLLM worker)."""

    def harnessrl_load_weights(self, path: str) -> int:
        """Load every tensor of a safetensors file into the live model; returns how many were loaded."""
        from safetensors.torch import load_file

        tensors = load_file(path)
        note_rotary_reload(logging.getLogger(RELOAD_LOGGER))
        # vLLM's in-place reload: restores checkpoint-format parameters layer by layer, runs the
        # model's load_weights (HF names -> fused qkv/gate_up, tied lm_head), then redoes the
        # post-load processing (e.g. the CPU backend's repacked linear weights).
        self.reload_weights(weights_iterator=iter(tensors.items()), is_checkpoint_format=True)  # type: ignore[attr-defined]
        return len(tensors)


def write_weights_file(named_tensors: Iterable[tuple[str, Any]], dtype: Any = None) -> str:
    """Driver side: write tensors (floats cast to dtype, if given) to a safetensors file in /dev/shm.

    Returns the path; the caller deletes it after the workers loaded it."""
    import torch
    from safetensors.torch import save_file

    tensors: dict[str, torch.Tensor] = {}
    for name, tensor in named_tensors:
        t = torch.as_tensor(tensor).detach().to("cpu")
        t = t.to(dtype) if dtype is not None and t.is_floating_point() else t
        tensors[name] = t.contiguous().clone()  # clone: tied/shared storages are refused by safetensors
    if not tensors:
        raise ValueError("update_weights got no tensors")
    directory = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
    fd, path = tempfile.mkstemp(prefix="harnessrl-weights-", suffix=".safetensors", dir=directory)
    os.close(fd)
    save_file(tensors, path)
    return path
