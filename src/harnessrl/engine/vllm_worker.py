"""Worker-side weight loading for vLLM, installed with `worker_extension_cls`.

vLLM mixes this class into every worker (the processes that own the model, separate from the
caller). The driver writes the new weights to a safetensors file in /dev/shm (shared memory, no
disk) and calls `collective_rpc("harnessrl_load_weights", args=(path,))`; each worker memory-maps
the file and hands the tensors to the worker's `reload_weights` (vLLM's layerwise in-place reload,
which calls the model's own `load_weights`: HF names -> fused/sharded parameters). Heavy imports stay inside methods:
this module is imported by the worker process by its dotted path.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from typing import Any

WORKER_EXTENSION = "harnessrl.engine.vllm_worker.HarnessRLWorkerExtension"


class HarnessRLWorkerExtension:
    """Methods callable through `collective_rpc` by name (self is the vLLM worker)."""

    def harnessrl_load_weights(self, path: str) -> int:
        """Load every tensor of a safetensors file into the live model; returns how many were loaded."""
        from safetensors.torch import load_file

        tensors = load_file(path)
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
