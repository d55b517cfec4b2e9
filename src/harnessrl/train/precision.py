"""Compute in the engine's precision over full-precision master weights (train = serve).

A bf16 engine serves `bf16(W)`, the trainer's fp32 master weights rounded to nearest. An fp32
trainer scores tokens with `W` itself; every Adam step moves almost every weight by ~lr, far less
than a bf16 rounding step, so `W` drifts away from what the engine serves and KL(engine || trainer)
grows with training (docs/training.md "Trainer/engine mismatch").

`compute_weights(model, bfloat16)` swaps every floating-point parameter of `model` for its bf16
cast, a differentiable copy, for the forward *and* backward passes inside the block: the model then
computes with exactly the weights the engine serves, in the engine's arithmetic (bf16 matmuls and
attention), and the gradient reaches the fp32 master parameters through the cast (it accumulates
there in fp32, chunk after chunk). The optimizer steps the masters; the next block casts again.
One cast per parameter per block (tied weights: one), so a block spanning an epoch's chunks casts
once per epoch; the casts live until the block ends (half the size of the weights).

Unlike `torch.autocast`, every parameter is rounded (embeddings and norms too, which autocast keeps
in fp32) and the activations stay in bf16 between ops, as in the engine. Parameters FSDP manages
(DTensors) are left alone: a sharded policy gets the same rounding from FSDP2's own
`MixedPrecisionPolicy(param_dtype=...)` (train/fsdp.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch


def _swappable(p: torch.Tensor | None, dtype: torch.dtype) -> bool:
    if p is None or not p.is_floating_point() or p.dtype == dtype:
        return False
    return type(p).__name__ != "DTensor" and not hasattr(p, "full_tensor")  # FSDP2 casts its own


@contextmanager
def compute_weights(model: torch.nn.Module, dtype: torch.dtype | None) -> Iterator[None]:
    """Inside the block `model` computes with its floating-point parameters cast to `dtype`
    (None, or the parameters' own dtype: unchanged). Gradients flow back to the parameters."""
    if dtype is None:
        yield
        return
    casts: dict[int, torch.Tensor] = {}
    swapped: list[tuple[torch.nn.Module, str, torch.nn.Parameter]] = []
    try:
        for module in model.modules():
            for name, p in list(module._parameters.items()):
                if p is None or not _swappable(p, dtype):
                    continue
                cast = casts.get(id(p))
                if cast is None:
                    cast = casts[id(p)] = p.to(dtype)
                module._parameters[name] = cast  # a tensor, read as module.<name>
                swapped.append((module, name, p))
        yield
    finally:
        for module, name, p in reversed(swapped):
            module._parameters[name] = p


def served_weights(named: Iterable[tuple[str, torch.Tensor]], dtype: torch.dtype | None) -> Iterator[tuple[str, Any]]:
    """The weights as the trainer computes with them: floating-point tensors cast to `dtype` (the
    same round-to-nearest as `compute_weights`), so an engine serves bit for bit what the trainer
    scored with; others (and every tensor when dtype is None) as they are."""
    for name, t in named:
        yield name, (t.to(dtype) if dtype is not None and t.is_floating_point() else t)


def dtype_of(name: str) -> torch.dtype:
    """torch.float32 / torch.bfloat16 ... from its name."""
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise ValueError(f"unknown dtype {name!r}")
    return dt
