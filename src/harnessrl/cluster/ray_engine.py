"""Engine replicas as Ray actors, and the Engine protocol over them (for the proxies).

`EngineActor` builds any engine with `make_engine` inside its process (one replica per placement
group bundle: its GPUs for vLLM/SGLang). `ActorEngine` is one replica seen from a proxy;
`RayEngine` is a ReplicatedEngine over them (rollout-key affinity), whose weight update puts the
tensors into the object store once and lets every replica fetch them (an ObjectRef returned by
the trainer actor is passed as is, so weights go trainer node -> engine nodes, never via the driver).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from harnessrl.engine.base import EngineError, Generation, NamedTensors, SamplingParams
from harnessrl.engine.replicas import ReplicatedEngine

if TYPE_CHECKING:
    import ray
    import torch

    from harnessrl.engine.factory import EngineConfig


class EngineActor:
    """The actor body (wrapped with ray.remote by `start_engines`)."""

    def __init__(self, engine_cfg: EngineConfig):
        from harnessrl.engine import make_engine

        self.engine = make_engine(engine_cfg)

    def info(self) -> dict[str, Any]:
        return {"model_path": self.engine.model_path, "max_model_len": int(self.engine.max_model_len),
                "policy_version": int(self.engine.policy_version)}

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Generation:
        return await self.engine.generate(prompt_ids, params)

    async def update_weights(self, tensors: list[tuple[str, torch.Tensor]], version: int) -> int:
        await asyncio.to_thread(self.engine.update_weights, tensors, version)
        return int(self.engine.policy_version)

    def close(self) -> None:
        self.engine.close()


class ActorEngine:
    """The Engine protocol over one EngineActor handle (usable from any process of the cluster)."""

    def __init__(self, handle: Any, info: dict[str, Any]):
        self.handle = handle
        self.model_path = info["model_path"]
        self.max_model_len = int(info["max_model_len"])
        self._version = int(info["policy_version"])

    @property
    def policy_version(self) -> int:
        """The newest version this process has seen from the replica (updates and generations)."""
        return self._version

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Generation:
        import ray

        try:
            gen = await self.handle.generate.remote(list(prompt_ids), params)
        except ray.exceptions.RayTaskError as err:
            cause = getattr(err, "cause", None)
            if isinstance(cause, (EngineError, ValueError)):
                raise cause from None  # EngineOverloaded / PromptTooLong keep their protocol meaning
            raise EngineError(f"engine replica failed: {err}") from None
        except ray.exceptions.RayActorError as err:
            raise EngineError(f"engine replica is gone: {err}") from None
        self._version = max(self._version, int(gen.policy_version))
        return gen

    def update_weights(self, named_tensors: NamedTensors | ray.ObjectRef, version: int) -> None:
        import ray

        arg = named_tensors if isinstance(named_tensors, ray.ObjectRef) else list(named_tensors)
        self._version = int(ray.get(self.handle.update_weights.remote(arg, int(version))))

    def close(self) -> None:
        pass  # the actor belongs to whoever started it (RayEngine.close)


class RayEngine(ReplicatedEngine):
    """Replicas behind one Engine; `owner=True` on the driver that started them (close kills them)."""

    def __init__(self, handles: list, infos: list[dict[str, Any]], owner: bool = False, pg: Any = None):
        super().__init__([ActorEngine(h, i) for h, i in zip(handles, infos)])
        self.handles, self.infos, self._owner, self._pg = list(handles), list(infos), owner, pg

    def spec(self) -> tuple[list, list[dict[str, Any]]]:
        """What another process needs to build its own RayEngine over the same replicas."""
        return self.handles, self.infos

    def shareable(self, named_tensors: NamedTensors | ray.ObjectRef) -> Any:
        """One object in the store that each replica fetches (an ObjectRef is passed as is)."""
        import ray

        return named_tensors if isinstance(named_tensors, ray.ObjectRef) else ray.put(list(named_tensors))

    def close(self) -> None:
        if not self._owner:
            return
        import ray

        for h in self.handles:
            try:
                ray.get(h.close.remote(), timeout=60)
            except Exception:  # noqa: BLE001 - killed below anyway
                pass
            ray.kill(h)
        if self._pg is not None:
            ray.util.remove_placement_group(self._pg)


def start_engines(engine_cfg: EngineConfig, replicas: int, cpus: float = 1.0, gpus: float = 0.0) -> RayEngine:
    """`replicas` EngineActors, one per bundle of a SPREAD placement group (one replica per node
    where the cluster allows)."""
    import ray

    from harnessrl.cluster.ray_cluster import in_bundle, placement_group

    pg = placement_group([{"CPU": cpus, "GPU": gpus}] * replicas, "SPREAD")
    actor = ray.remote(EngineActor)
    handles = [actor.options(num_cpus=cpus, num_gpus=gpus, scheduling_strategy=in_bundle(pg, i),
                             max_concurrency=1000).remote(engine_cfg) for i in range(replicas)]
    infos = ray.get([h.info.remote() for h in handles])
    return RayEngine(handles, infos, owner=True, pg=pg)
