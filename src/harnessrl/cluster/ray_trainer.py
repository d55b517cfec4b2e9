"""The trainer as a Ray actor in its own placement group (its GPUs), driven by the loop.

`TrainerActor` holds a `train.trainer.Trainer`, built inside the actor by the factory it is given
(the run passes `run.setup.make_trainer` with the run's config, so nothing here reads a run
config). `RemoteTrainer` is the loop's `train.protocol.TrainerBackend` over that actor: `update`,
`tree_values`, `sync_weights` (the actor's weights go as one object-store ref straight to the engine
replicas), `save_checkpoint` (written by the actor: on a multi-node cluster, output.run_dir must be
a filesystem the trainer's node shares with the driver), `close`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    import numpy as np

    from harnessrl.engine.base import Engine
    from harnessrl.train.batch import TrainBatch
    from harnessrl.train.trainer import Trainer
    from harnessrl.train.update_stats import UpdateStats
    from harnessrl.tree.nodes import FlatTree


class TrainerActor:
    """The actor body: the Trainer that `make_trainer()` builds in the actor's process."""

    def __init__(self, make_trainer: Callable[[], Trainer]):
        self.trainer = make_trainer()

    def ready(self) -> bool:
        return True

    def update(self, batch: TrainBatch) -> UpdateStats:
        return self.trainer.update(batch)

    def tree_values(self, flat: FlatTree) -> np.ndarray:
        return self.trainer.tree_values(flat)

    def named_weights(self) -> list:
        return [(k, v.detach().cpu()) for k, v in self.trainer.named_weights()]

    def save_checkpoint(self, run_dir: str, step: int, source_dir: str | None, keep: int) -> str:
        return str(self.trainer.save_checkpoint(Path(run_dir), step, Path(source_dir) if source_dir else None, keep))


class RemoteTrainer:
    """The TrainerBackend protocol over one TrainerActor handle."""

    def __init__(self, handle: Any, pg: Any):
        self.handle, self._pg = handle, pg

    def update(self, batch: TrainBatch) -> UpdateStats:
        import ray

        return ray.get(self.handle.update.remote(batch))

    def tree_values(self, flat: FlatTree) -> np.ndarray:
        import ray

        return ray.get(self.handle.tree_values.remote(flat))

    def sync_weights(self, engine: Engine, version: int) -> None:
        """Weights as one ref from the trainer actor to every replica (RayEngine), else via here."""
        import ray

        if hasattr(engine, "spec"):
            engine.update_weights(self.handle.named_weights.remote(), version)
        else:
            engine.update_weights(list(ray.get(self.handle.named_weights.remote())), version)

    def save_checkpoint(self, run_dir: Path, step: int, source_dir: Path | None, keep: int) -> Path:
        import ray

        src = str(source_dir) if source_dir else None
        return Path(ray.get(self.handle.save_checkpoint.remote(str(run_dir), step, src, keep)))

    def close(self) -> None:
        import ray

        ray.kill(self.handle)
        ray.util.remove_placement_group(self._pg)


def start_trainer(make_trainer: Callable[[], Trainer], cpus: float = 1.0, gpus: float = 0.0) -> RemoteTrainer:
    """A TrainerActor (built by `make_trainer`, a picklable callable) in a placement group of its own."""
    import ray

    from harnessrl.cluster.ray_cluster import in_bundle, placement_group

    pg = placement_group([{"CPU": cpus, "GPU": gpus}], "PACK")
    handle = ray.remote(TrainerActor).options(num_cpus=cpus, num_gpus=gpus, scheduling_strategy=in_bundle(pg, 0)) \
        .remote(make_trainer)
    try:
        ray.get(handle.ready.remote())  # a policy that cannot load fails here, with its error
    except BaseException:
        ray.kill(handle)
        ray.util.remove_placement_group(pg)
        raise
    return RemoteTrainer(handle, pg)
