"""Checkpoints: a plain HF policy directory (transformers and `vllm serve` load it) + trainer state.

Layout: `<run_dir>/checkpoints/step_000007/{policy/, trainer.pt}`. A checkpoint is written into
a temporary sibling and renamed into place, so a directory with the final name is complete. The
loop records a step in the run store only after its checkpoint is in place: the last recorded
step is the resume point, and a crash between the two only redoes that one step (its record is
written once, after the redo).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import torch

from harnessrl.train.weights import base_model, checkpoint_tensors, hf_named_weights

_MODEL_FILES = (".safetensors", ".bin", ".pt", ".gguf")


def checkpoint_dir(run_dir: Path, step: int) -> Path:
    return Path(run_dir) / "checkpoints" / f"step_{step:06d}"


def save_policy(policy: torch.nn.Module, out_dir: Path, source_dir: Path | None) -> None:
    """Save merged HF weights + config, and the tokenizer / chat template / generation config."""
    out_dir.mkdir(parents=True, exist_ok=True)
    state = checkpoint_tensors(policy, dict(hf_named_weights(policy)))
    model = base_model(policy)
    model.save_pretrained(out_dir, state_dict=state, safe_serialization=True)
    if source_dir is not None:
        for f in Path(source_dir).iterdir():
            if f.is_file() and not f.name.endswith(_MODEL_FILES) and not (out_dir / f.name).exists():
                shutil.copy2(f, out_dir / f.name)


def save_checkpoint(run_dir: Path, step: int, policy: torch.nn.Module, trainer_state: dict, source_dir: Path | None,
                    keep: int = 2) -> Path:
    """Atomically write checkpoint `step`; keep the newest `keep` checkpoints."""
    return write_checkpoint(run_dir, step, lambda out: save_policy(policy, out, source_dir), trainer_state, keep)


def write_checkpoint(run_dir: Path, step: int, write_policy: Callable[[Path], None], trainer_state: dict,
                     keep: int = 2) -> Path:
    """Atomically write checkpoint `step`, its HF dir written by `write_policy(dir)` (a sharded
    trainer writes weights it gathered); keep the newest `keep` checkpoints."""
    final = checkpoint_dir(run_dir, step)
    tmp = final.with_name(final.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    write_policy(tmp / "policy")
    torch.save(trainer_state, tmp / "trainer.pt")
    _fsync_dir(tmp)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    _fsync_dir(final.parent)
    prune_checkpoints(run_dir, keep)
    return final


def prune_checkpoints(run_dir: Path, keep: int) -> None:
    ckpts = sorted(p for p in (Path(run_dir) / "checkpoints").glob("step_*") if not p.name.endswith(".tmp"))
    for p in ckpts[:-keep]:
        shutil.rmtree(p, ignore_errors=True)


def latest_checkpoint(run_dir: Path, at_most: int | None = None) -> tuple[int, Path] | None:
    """(step, dir) of the newest complete checkpoint (step <= at_most when given)."""
    best = None
    for p in (Path(run_dir) / "checkpoints").glob("step_*"):
        if p.name.endswith(".tmp") or not (p / "trainer.pt").is_file():
            continue
        step = int(p.name.split("_")[1])
        if (at_most is None or step <= at_most) and (best is None or step > best[0]):
            best = (step, p)
    return best


def load_trainer_state(ckpt: Path) -> dict:
    return torch.load(ckpt / "trainer.pt", map_location="cpu", weights_only=False)


def _fsync_dir(path: Path) -> None:
    for f in path.rglob("*"):
        if f.is_file():
            with open(f, "rb") as fh:
                os.fsync(fh.fileno())
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
