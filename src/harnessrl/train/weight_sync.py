"""The one way a trainer's weights reach an engine, for every trainer backend.

A sync has two halves, and every backend goes through both:

1. `rank_served_weights(source)`, on every rank of the trainer: the rank takes part in gathering the
   policy (`named_weights()`: plain HF names, LoRA merged) and, on the sending rank (rank 0, the
   only rank of an unsharded trainer), returns the weights as the trainer computes with them: cast
   to `compute_dtype` (bf16 under a bf16 engine, train/precision.py), detached (on CPU for a Ray
   actor). Every other rank returns [].
2. `send_weights(engine, weights, version)`, once, by whoever holds rank 0's result: into the engine,
   which then serves them as `version`. Rank 0's result may be a Ray object ref (a trainer in an
   actor): an engine whose replicas fetch from the object store (`RefWeightsEngine`, e.g.
   cluster.ray_engine.RayEngine) takes the ref as it is; any other engine gets the tensors.

`Trainer.sync_weights` (one process) runs both halves in place; `cluster.ray_trainer.RemoteTrainer`
runs half 1 in each rank's actor and half 2 on the driver. Nothing else calls
`engine.update_weights` with a trainer's weights (tests/train/test_weight_sync.py greps for it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Protocol, runtime_checkable

from harnessrl.train.precision import served_weights

if TYPE_CHECKING:
    import torch

    from harnessrl.engine.base import Engine


class WeightSource(Protocol):
    """One rank's trainer, as a sync sees it."""

    @property
    def compute_dtype(self) -> torch.dtype | None:
        """The dtype the policy computes with; None: as stored."""
        ...

    def named_weights(self) -> Iterable[tuple[str, torch.Tensor]]:
        """The policy under HF names; a sharded rank other than 0 gets none after its part of the gather."""
        ...


@runtime_checkable
class RefWeightsEngine(Protocol):
    """An engine whose replicas fetch weights from Ray's object store: it takes an object ref as is."""

    def shareable(self, named_tensors: Any) -> Any:
        ...


def rank_served_weights(source: WeightSource, *, on_cpu: bool) -> list[tuple[str, torch.Tensor]]:
    """This rank's half of a sync: the served weights (compute dtype, detached) on the sending rank,
    [] on the others (after taking part in the gather). `on_cpu` for a trip through Ray's object
    store; an engine in the trainer's own process takes them where they are."""
    served = served_weights(source.named_weights(), source.compute_dtype)
    return [(name, t.detach().cpu() if on_cpu else t.detach()) for name, t in served]


def send_weights(engine: Engine, weights: list[tuple[str, torch.Tensor]] | Any, version: int) -> None:
    """Rank 0's served weights (the list `rank_served_weights` made, or a Ray object ref of it) into
    `engine`; a ref is resolved here unless the engine takes refs itself."""
    if not isinstance(weights, list) and not isinstance(engine, RefWeightsEngine):
        import ray

        weights = ray.get(weights)
    engine.update_weights(weights, version)
