"""Rollout workers as Ray actors, each with its own proxy and run-store shard on its node.

A `RolloutWorker` runs the same `RunnerCollector` as the local backend (proxy -> sandbox ->
harness -> verifier), so harness traffic stays on the worker's node: the harness talks to a proxy
on 127.0.0.1, and the proxy reaches the engine replicas through Ray. The proxy commits each call to
the worker's shard (a RunStore on the worker's disk) before it answers, which keeps the invariant
"a call is durable before its response is sent" without a cross-node hop per call.

The logical run store is the driver's: when a worker's groups are done, `RayCollector` copies
their calls and rollout records from the worker (over Ray) into it, calls first, and the loop then
reads groups from it exactly as in the local backend. Why shards merged by the trainer's side
rather than one remote store: every call would otherwise pay a network round trip to a single
writer before its response, and the store process would be a single point of failure for all
harnesses; a shard is as durable as the local store and is merged once per group.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol, Sequence, TypeVar

if TYPE_CHECKING:
    from harnessrl.cluster.ray_engine import RayEngine
    from harnessrl.engine.base import Engine
    from harnessrl.rollout.plan import GroupPlan
    from harnessrl.store.run_store import RunStore


class PlansRunner(Protocol):
    """A worker's collector (run/collector_seam.py `Collector`): runs group plans into its store."""

    def run(self, plans: Sequence[GroupPlan]) -> None: ...

    def close(self) -> None: ...


# builds a worker's collector over its engine and shard store (the run passes RunnerCollector with
# the run's config and model dir: nothing here reads a run config); called inside the actor
CollectorFactory = Callable[["Engine", "RunStore"], PlansRunner]
T = TypeVar("T")


class RolloutWorker:
    """The actor body (wrapped with ray.remote by RayCollector)."""

    def __init__(self, make_collector: CollectorFactory, engine_spec: tuple, shard_dir: str):
        from harnessrl.cluster.ray_engine import RayEngine
        from harnessrl.store.run_store import RunStore

        self.store = RunStore(shard_dir)
        self.engine = RayEngine(*engine_spec)  # not the owner: the driver stops the replicas
        self.collector = make_collector(self.engine, self.store)

    def node(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def run(self, plans: list[GroupPlan]) -> tuple[list, list]:
        """Run the planned groups; return their rollout records and calls (raw bodies included)."""
        self.collector.run(plans)
        rollouts = [r for p in plans for r in self.store.list_rollouts(group_id=p.group_id)]
        calls = self.store.list_calls([r.rollout_id for r in rollouts], include_raw=True) if rollouts else []
        return rollouts, calls

    def close(self) -> None:
        self.collector.close()
        self.store.close()


def split_plans(plans: Sequence[T], n: int) -> list[list[T]]:
    """Whole groups to workers, round robin in plan order (deterministic)."""
    out: list[list[T]] = [[] for _ in range(n)]
    for i, p in enumerate(plans):
        out[i % n].append(p)
    return out


class RayCollector:
    """The loop's Collector over `workers` RolloutWorker actors (SPREAD over the cluster's nodes)."""

    def __init__(self, make_collector: CollectorFactory, engine: RayEngine, store: RunStore, workers: int = 2,
                 cpus: float = 1.0, shard_root: str | None = None):
        import ray

        self.store = store
        root = Path(shard_root) if shard_root else Path(store.run_dir) / "shards"
        actor = ray.remote(RolloutWorker)
        self.workers = [actor.options(num_cpus=cpus, scheduling_strategy="SPREAD", max_concurrency=2).remote(
            make_collector, engine.spec(), str(root / f"worker-{i}")) for i in range(workers)]
        self.nodes = ray.get([w.node.remote() for w in self.workers])  # also waits until they are up

    def run(self, plans: Sequence[GroupPlan], progress: Callable[..., None] | None = None) -> None:
        import ray

        pending = {}
        for w, sub in zip(self.workers, split_plans(plans, len(self.workers))):
            if sub:
                pending[w.run.remote(sub)] = sub
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            pending.pop(done[0])
            rollouts, calls = ray.get(done[0])
            self.store.insert_calls(calls)  # calls first: a rollout record means its calls are there
            for r in rollouts:
                self.store.put_rollout(r)
            if progress:
                progress(len(rollouts))

    def close(self) -> None:
        import ray

        for w in self.workers:
            try:
                ray.get(w.close.remote(), timeout=60)
            except Exception:  # noqa: BLE001 - killed below anyway
                pass
            ray.kill(w)
