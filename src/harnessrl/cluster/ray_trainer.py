"""The trainer as a Ray actor in its own placement group (its GPUs), driven by the loop.

`RemoteTrainer` offers what the loop uses of a Trainer: `update(batch)`, `push_weights(engine,
version)` (the actor's weights go as one object-store ref straight to the engine replicas),
`named_weights()`, `save_checkpoint(...)` (written by the actor: on a multi-node cluster,
output.run_dir must be a filesystem the trainer's node shares with the driver).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator


class TrainerActor:
    """The actor body: policy + optimizer (+ LoRA / reference) built from the run config."""

    def __init__(self, cfg_json: dict, weights_dir: str, model_dir: str, ckpt_dir: str | None, seed: int):
        from harnessrl.run.config import RunConfig
        from harnessrl.run.setup import build_trainer, load_policy, restore_trainer, seed_everything
        from harnessrl.train.checkpoint import load_trainer_state

        cfg = RunConfig.model_validate(cfg_json)
        seed_everything(seed)
        self.trainer = build_trainer(cfg, load_policy(cfg, Path(weights_dir)), Path(model_dir))
        if ckpt_dir:
            restore_trainer(self.trainer, load_trainer_state(Path(ckpt_dir)))

    def ready(self) -> bool:
        return True

    def update(self, batch) -> dict[str, float]:
        return self.trainer.update(batch)

    def named_weights(self) -> list:
        return [(k, v.detach().cpu()) for k, v in self.trainer.named_weights()]

    def save_checkpoint(self, run_dir: str, step: int, model_dir: str, keep: int) -> str:
        from harnessrl.run.setup import trainer_state
        from harnessrl.train.checkpoint import save_checkpoint

        return str(save_checkpoint(Path(run_dir), step, self.trainer.policy, trainer_state(self.trainer),
                                   Path(model_dir), keep=keep))


class RemoteTrainer:
    def __init__(self, handle: Any, pg: Any, token_budget: int, backend: str):
        self.handle, self._pg = handle, pg
        self.token_budget, self.backend, self.critic = token_budget, backend, None

    def update(self, batch) -> dict[str, float]:
        import ray

        return ray.get(self.handle.update.remote(batch))

    def named_weights(self) -> Iterator[tuple[str, Any]]:
        import ray

        return iter(ray.get(self.handle.named_weights.remote()))

    def push_weights(self, engine, version: int) -> None:
        """Weights as one ref from the trainer actor to every replica (RayEngine), else via here."""
        if hasattr(engine, "spec"):
            engine.update_weights(self.handle.named_weights.remote(), version)
        else:
            engine.update_weights(list(self.named_weights()), version)

    def save_checkpoint(self, run_dir: Path, step: int, model_dir: Path, keep: int) -> Path:
        import ray

        return Path(ray.get(self.handle.save_checkpoint.remote(str(run_dir), step, str(model_dir), keep)))

    def close(self) -> None:
        import ray

        ray.kill(self.handle)
        ray.util.remove_placement_group(self._pg)


def start_trainer(cfg, weights_dir: Path, model_dir: Path, ckpt_dir: Path | None, seed: int,
                  cpus: float = 1.0, gpus: float = 0.0) -> RemoteTrainer:
    import ray

    from harnessrl.cluster.ray_cluster import in_bundle, placement_group

    pg = placement_group([{"CPU": cpus, "GPU": gpus}], "PACK")
    handle = ray.remote(TrainerActor).options(num_cpus=cpus, num_gpus=gpus, scheduling_strategy=in_bundle(pg, 0)) \
        .remote(cfg.model_dump(mode="json"), str(weights_dir), str(model_dir), str(ckpt_dir) if ckpt_dir else None,
                seed)
    ray.get(handle.ready.remote())  # a policy that cannot load fails here, with its error
    backend = "flex" if gpus > 0 else (cfg.model.attention if cfg.model.attention != "auto" else "sdpa")
    return RemoteTrainer(handle, pg, cfg.algorithm.token_budget, backend)
