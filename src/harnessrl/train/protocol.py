"""The trainer as the run loop drives it: one protocol for every backend.

In the style of vLLM's executor/worker split: `train.trainer.Trainer` is the worker (it owns the
policy, its optimizer, the reference and the critic, in this process), and a backend that runs it
elsewhere wraps it behind the same calls, e.g. `cluster.ray_trainer.RemoteTrainer` (the Trainer in
a Ray actor, on the cluster's GPUs). The loop holds a `TrainerBackend` and never asks which one.

    update(batch)                         one tree-packed PPO/GRPO update -> UpdateStats
    tree_values(flat)                     the critic's value of every tree token (ppo)
    sync_weights(engine, version)         the policy's weights (HF names, LoRA merged) into the engine
    save_checkpoint(run_dir, step, ...)   an atomic checkpoint: HF policy dir + trainer state
    close()                               release what the backend holds (actors, placement groups)

Torch-free: the loop and the run config import this without torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np

    from harnessrl.engine.base import Engine
    from harnessrl.train.batch import TrainBatch
    from harnessrl.train.update_stats import UpdateStats
    from harnessrl.tree.nodes import FlatTree


class TrainerBackend(Protocol):
    """What the run loop needs of a trainer, wherever it runs."""

    def update(self, batch: TrainBatch) -> UpdateStats:
        """One update on the batch (every epoch of it); the stats of the update."""
        ...

    def tree_values(self, flat: FlatTree) -> np.ndarray:
        """The critic's value of every token of a flattened tree (algorithm ppo)."""
        ...

    def sync_weights(self, engine: Engine, version: int) -> None:
        """Push the policy's weights into the engine, which then serves them as `version`."""
        ...

    def save_checkpoint(self, run_dir: Path, step: int, source_dir: Path | None, keep: int) -> Path:
        """Write checkpoint `step` under run_dir atomically (tokenizer files from source_dir); keep
        the newest `keep`. Returns its directory."""
        ...

    def close(self) -> None:
        ...
