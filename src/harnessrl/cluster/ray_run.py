"""The run's Ray parts: join/start the cluster, engine replicas, the trainer actor."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable


def start_ray_parts(cfg, engine_cfg, weights_dir: Path, model_dir: Path, ckpt_dir: Path | None,
                    seed: int) -> tuple[Any, Any, list[Callable[[], None]]]:
    """(RemoteTrainer, RayEngine, closers) for cluster.backend=ray; the rollout workers come with
    the collector (run.backends.default_collector)."""
    from harnessrl.cluster.ray_cluster import connect, shutdown
    from harnessrl.cluster.ray_engine import start_engines
    from harnessrl.cluster.ray_trainer import start_trainer

    r = cfg.cluster.ray
    started = connect(r.address, r.num_cpus)
    closers: list[Callable[[], None]] = [shutdown] if started else []
    engine = None
    try:
        one = engine_cfg.model_copy(update={"replicas": 1})  # each actor holds one replica
        engine = start_engines(one, cfg.engine.replicas, r.engine_cpus, r.engine_gpus)
        trainer = start_trainer(cfg, weights_dir, model_dir, ckpt_dir, seed, r.trainer_cpus, r.trainer_gpus)
    except BaseException:
        for close in ([engine.close] if engine else []) + closers:
            close()
        raise
    return trainer, engine, [trainer.close, *closers]  # the run closes the engine itself
