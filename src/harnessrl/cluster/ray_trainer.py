"""The trainer as Ray actors in one placement group (their GPUs), driven by the loop.

`start_trainer` starts `world` `TrainerActor`s, one per bundle. Each builds its trainer with the
factory it is given (the run passes `run.trainer_setup.make_trainer`, or `make_sharded_trainer` when
cluster.ray.trainer_world_size > 1, with the run's config, so nothing here reads a run config);
with several ranks each actor first sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT
(rank 0's node, a free port there), and the factory joins the group (`train.fsdp.init_ranks`: gloo
on CPU, NCCL on GPUs) and shards the policy.

`RemoteTrainer` is the loop's `train.protocol.TrainerBackend` over the actors. Every call goes to
every rank at once (the batch as one object-store ref), because each is a collective over them
(train/fsdp.py), and returns rank 0's result: `update` (the stats are summed over ranks),
`tree_values`, `sync_weights` (every rank takes part in the gather; rank 0's full weights go as
one object-store ref straight to the engine replicas), `save_checkpoint` (written by rank 0,
atomically: on a multi-node cluster output.run_dir must be a filesystem the trainer's nodes share
with the driver), `close`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Union

if TYPE_CHECKING:
    import numpy as np

    from harnessrl.engine.base import Engine
    from harnessrl.train.batch import TrainBatch
    from harnessrl.train.fsdp import ShardedTrainer
    from harnessrl.train.trainer import Trainer
    from harnessrl.train.update_stats import UpdateStats
    from harnessrl.tree.nodes import FlatTree

    RankTrainer = Union[Trainer, ShardedTrainer]  # one process's trainer: the whole policy, or a shard


class TrainerActor:
    """The actor body: one trainer rank, built by `start(make_trainer, env)` in the actor's process."""

    def __init__(self) -> None:
        self.trainer: RankTrainer | None = None

    def where(self) -> tuple[str, int]:
        """(this node's IP, a port free on it now): rank 0's are the group's rendezvous. The port is
        probed on every address (torch's TCPStore listens on all of them, and ranks on other nodes
        connect to the node's IP, not loopback); the probe socket never listens."""
        import socket

        import ray

        ip = ray.util.get_node_ip_address()
        with socket.socket() as s:
            s.bind(("", 0))
            port = int(s.getsockname()[1])
        return ip, port

    def start(self, make_trainer: Callable[[], RankTrainer], env: dict[str, str]) -> bool:
        os.environ.update(env)
        self.trainer = make_trainer()
        return True

    def _trainer(self) -> RankTrainer:
        if self.trainer is None:
            raise RuntimeError("TrainerActor: start() it first")
        return self.trainer

    def update(self, batch: TrainBatch) -> UpdateStats:
        return self._trainer().update(batch)

    def tree_values(self, flat: FlatTree) -> np.ndarray:
        return self._trainer().tree_values(flat)

    def served_weights(self) -> list:
        """This rank's half of a weight sync (train/weight_sync.py): the served weights on rank 0,
        [] on a sharded rank > 0 after taking part in the gather."""
        from harnessrl.train.weight_sync import rank_served_weights

        return rank_served_weights(self._trainer(), on_cpu=True)

    def save_checkpoint(self, run_dir: str, step: int, source_dir: str | None, keep: int) -> str:
        src = Path(source_dir) if source_dir else None
        return str(self._trainer().save_checkpoint(Path(run_dir), step, src, keep))

    def close(self) -> None:
        if self.trainer is not None:
            self.trainer.close()


class RemoteTrainer:
    """The TrainerBackend protocol over the TrainerActor handles of every rank (rank 0 first)."""

    def __init__(self, handles: list, pg: Any):
        if not handles:
            raise ValueError("RemoteTrainer needs one trainer actor or more")
        self.handles, self._pg = list(handles), pg

    def update(self, batch: TrainBatch) -> UpdateStats:
        """Every rank on the same batch, concurrently; rank 0's stats."""
        import ray

        ref = ray.put(batch)
        return ray.get([h.update.remote(ref) for h in self.handles])[0]

    def tree_values(self, flat: FlatTree) -> np.ndarray:
        import ray

        ref = ray.put(flat)
        return ray.get([h.tree_values.remote(ref) for h in self.handles])[0]

    def sync_weights(self, engine: Engine, version: int) -> None:
        """Every rank gathers (train/weight_sync.py); rank 0's served weights go as one object-store
        ref to an engine that takes refs (RayEngine's replicas), else as tensors via here."""
        import ray

        from harnessrl.train.weight_sync import send_weights

        refs = [h.served_weights.remote() for h in self.handles]
        send_weights(engine, refs[0], version)
        ray.get(refs[1:])  # the other ranks' part of the gather (and their errors)

    def save_checkpoint(self, run_dir: Path, step: int, source_dir: Path | None, keep: int) -> Path:
        import ray

        src = str(source_dir) if source_dir else None
        return Path(ray.get([h.save_checkpoint.remote(str(run_dir), step, src, keep) for h in self.handles])[0])

    def close(self) -> None:
        import ray

        try:
            ray.get([h.close.remote() for h in self.handles], timeout=60)
        except Exception:  # noqa: BLE001 - the actors are killed next either way
            pass
        for h in self.handles:
            ray.kill(h)
        ray.util.remove_placement_group(self._pg)


def rank_envs(places: list[tuple[str, int]]) -> list[dict[str, str]]:
    """Each rank's torch.distributed env from every rank's (node IP, free port): rank 0's node and
    port are the rendezvous (127.0.0.1 when every rank is on one node), LOCAL_RANK counts per node."""
    world = len(places)
    if world == 1:
        return [{}]
    nodes = [ip for ip, _ in places]
    master = "127.0.0.1" if len(set(nodes)) == 1 else nodes[0]
    return [{"RANK": str(r), "WORLD_SIZE": str(world), "LOCAL_RANK": str(nodes[:r].count(ip)),
             "MASTER_ADDR": master, "MASTER_PORT": str(places[0][1])} for r, ip in enumerate(nodes)]


def start_trainer(make_trainer: Callable[[], RankTrainer], cpus: float = 1.0, gpus: float = 0.0,
                  world: int = 1) -> RemoteTrainer:
    """`world` TrainerActors (each built by `make_trainer`, a picklable callable; with world > 1 a
    sharded trainer that joins the group its env names) in one placement group, a bundle each."""
    import ray

    from harnessrl.cluster.ray_cluster import in_bundle, placement_group

    pg = placement_group([{"CPU": cpus, "GPU": gpus}] * world, "PACK")
    actor = ray.remote(TrainerActor)
    handles = [actor.options(num_cpus=cpus, num_gpus=gpus, scheduling_strategy=in_bundle(pg, r)).remote()
               for r in range(world)]
    try:
        envs = rank_envs(ray.get([h.where.remote() for h in handles]))
        # every rank at once: joining the group waits for all of them; a policy that cannot load fails here
        ray.get([h.start.remote(make_trainer, env) for h, env in zip(handles, envs)])
    except BaseException:
        for h in handles:
            ray.kill(h)
        ray.util.remove_placement_group(pg)
        raise
    return RemoteTrainer(handles, pg)
