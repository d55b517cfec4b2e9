"""The run's Ray parts: join/start the cluster, engine replicas, the trainer actors (its ranks)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Protocol

if TYPE_CHECKING:
    from harnessrl.engine.factory import EngineConfig
    from harnessrl.cluster.ray_engine import RayEngine
    from harnessrl.cluster.ray_trainer import RankTrainer, RemoteTrainer


class RaySettings(Protocol):
    """What the Ray parts read of the run config's cluster.ray section (nothing here reads a run config)."""

    @property
    def address(self) -> str: ...
    @property
    def num_cpus(self) -> int | None: ...
    @property
    def engine_cpus(self) -> float: ...
    @property
    def engine_gpus(self) -> float: ...
    @property
    def trainer_cpus(self) -> float: ...
    @property
    def trainer_gpus(self) -> float: ...
    @property
    def trainer_world_size(self) -> int: ...


def start_ray_parts(ray_cfg: RaySettings, engine_cfg: EngineConfig, replicas: int,
                    make_trainer: Callable[[], RankTrainer]) -> tuple[RemoteTrainer, RayEngine, list[Callable[[], None]]]:
    """(RemoteTrainer, RayEngine, closers) for cluster.backend=ray: `ray_cfg` is the run config's
    cluster.ray section, `engine_cfg` one replica's engine config, `make_trainer` builds the trainer
    inside each of its cluster.ray.trainer_world_size actors (a sharded one when there are several).
    The rollout workers come with the collector (run.runner_collector.default_collector)."""
    from harnessrl.cluster.ray_cluster import connect, shutdown
    from harnessrl.cluster.ray_engine import start_engines
    from harnessrl.cluster.ray_trainer import start_trainer

    started = connect(ray_cfg.address, ray_cfg.num_cpus)
    closers: list[Callable[[], None]] = [shutdown] if started else []
    engine = None
    try:
        one = engine_cfg.model_copy(update={"replicas": 1})  # each actor holds one replica
        engine = start_engines(one, replicas, ray_cfg.engine_cpus, ray_cfg.engine_gpus)
        trainer = start_trainer(make_trainer, ray_cfg.trainer_cpus, ray_cfg.trainer_gpus, ray_cfg.trainer_world_size)
    except BaseException:
        for close in ([engine.close] if engine else []) + closers:
            close()
        raise
    return trainer, engine, [trainer.close, *closers]  # the run closes the engine itself
