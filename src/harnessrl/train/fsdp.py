"""The trainer over several processes with PyTorch FSDP2 (`torch.distributed.fsdp.fully_shard`).

Every rank holds a shard of the policy (each decoder layer is its own FSDP unit, the root holds
the embeddings and head) and the same batch. `Trainer.update` packs the batch into chunks as
usual; `assign_chunks` gives each rank a share balanced by tokens and pads the shorter shares with
zero-weight repeats, because every forward (parameter all-gather) and backward (gradient
reduce-scatter) is a collective that all ranks must run the same number of times. FSDP averages
gradients over ranks, so each rank scales its loss by the world size: the step equals the
one-process step on the whole batch (the test checks loss and gradients on 2 gloo processes).
A sharded update records no per-harness gradient cosine (`UpdateStats.grad_cosine`): every backward
reduces the gradient shards over the ranks, so no rank holds one harness's gradient.

Process layout: every rank is a process (a Ray trainer actor, `cluster/ray_trainer.py`, or one
torchrun process) holding a `ShardedTrainer`, and every rank makes every `TrainerBackend` call in
the same order (the driver, `cluster.ray_trainer.RemoteTrainer`, sends each call to all ranks at
once and keeps rank 0's result). Data collectives use NCCL on GPUs and gloo on CPU; a gloo control
group carries the small ones. Weights for engine sync and HF checkpoints are gathered tensor by
tensor (`full_tensor`), LoRA adapters merged into the base weights on the gathered copy; rank 0
sends them to the engine and writes the checkpoint, whose trainer state holds the optimizer's
full (gathered) state dict, which `ShardedTrainer.restore` shards again on resume.
"""

from __future__ import annotations

import gc
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
import torch.distributed as dist

from harnessrl.train.weights import is_peft

if TYPE_CHECKING:
    from harnessrl.train.batch import TrainBatch
    from harnessrl.train.trainer import Trainer
    from harnessrl.train.update_stats import UpdateStats
    from harnessrl.tree.nodes import FlatTree


@dataclass
class Ranks:
    """This process's place in the trainer group, and the small collectives the trainer needs."""

    rank: int
    world: int
    control: Any = None  # process group for Python objects (gloo); None = the default group
    mesh: Any = field(default=None, repr=False)

    def sum_floats(self, xs: list[float]) -> list[float]:
        t = torch.tensor(xs, dtype=torch.float64)
        dist.all_reduce(t, group=self.control)
        return t.tolist()

    def sum_dicts(self, d: dict[str, float]) -> dict[str, float]:
        parts: list[Any] = [None] * self.world
        dist.all_gather_object(parts, d, group=self.control)
        out: dict[str, float] = {}
        for p in parts:
            for k, v in p.items():
                out[k] = out.get(k, 0.0) + v
        return out

    def barrier(self) -> None:
        dist.barrier(group=self.control)


def init_ranks(backend: str | None = None) -> Ranks:
    """Join the process group described by torchrun's env (RANK, WORLD_SIZE, MASTER_ADDR/PORT);
    NCCL when CUDA is there, else gloo; a gloo control group for objects; a 1-D device mesh."""
    from torch.distributed.device_mesh import init_device_mesh

    if not dist.is_initialized():
        cuda = torch.cuda.is_available()
        backend = backend or ("nccl" if cuda else "gloo")
        if cuda:
            # a Ray actor sees only its own GPU(s): its local rank wraps onto the visible devices
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
        dist.init_process_group(backend)
    world, rank = dist.get_world_size(), dist.get_rank()
    control = dist.new_group(backend="gloo") if dist.get_backend() != "gloo" else None
    mesh = init_device_mesh("cuda" if dist.get_backend() == "nccl" else "cpu", (world,))
    return Ranks(rank, world, control, mesh)


def decoder_layers(model: torch.nn.Module) -> list[torch.nn.Module]:
    """The transformer blocks of a transformers causal LM (through a peft wrapper)."""
    base = model.get_base_model() if is_peft(model) else model
    inner = getattr(base, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None:
        raise ValueError(f"{type(base).__name__}: no .model.layers to shard (a decoder-only transformers model?)")
    return list(layers)


def shard_model(model: torch.nn.Module, ranks: Ranks, mp_policy: Any = None) -> torch.nn.Module:
    """fully_shard every decoder layer, then the root (embeddings, norm, head). In place; returns model."""
    from torch.distributed.fsdp import fully_shard

    kw: dict[str, Any] = {"mesh": ranks.mesh}
    if mp_policy is not None:
        kw["mp_policy"] = mp_policy
    for layer in decoder_layers(model):
        fully_shard(layer, **kw)
    fully_shard(model, **kw)
    return model


def assign_chunks(chunks: list, targets: list, rank: int, world: int) -> list[tuple]:
    """This rank's (chunk, targets, live) list: chunks with targets go to the least loaded rank,
    longest first (every rank computes the same assignment from the same batch); shares are padded
    to equal length with the shortest live chunk at zero weight (`live=False`)."""
    live = [i for i, tg in enumerate(targets) if len(tg.local)]
    loads, owner = [0] * world, {}
    for i in sorted(live, key=lambda i: (-len(chunks[i]), i)):
        r = min(range(world), key=lambda r: (loads[r], r))
        owner[i] = r
        loads[r] += len(chunks[i])
    counts = [sum(1 for i in live if owner[i] == r) for r in range(world)]
    mine = [(chunks[i], targets[i], True) for i in live if owner[i] == rank]
    if len(mine) < max(counts, default=0):
        pad = min(live, key=lambda i: (len(chunks[i]), i))
        mine += [(chunks[pad], targets[pad], False)] * (max(counts) - len(mine))
    return mine


def lora_scalings(model: torch.nn.Module) -> dict[str, float]:
    """{module name: scaling} of peft LoRA layers (adapter 'default')."""
    out = {}
    for name, mod in model.named_modules():
        sc = getattr(mod, "scaling", None)
        if isinstance(sc, dict) and "default" in sc and hasattr(mod, "lora_A"):
            out[name] = float(sc["default"])
    return out


def gathered_state(model: torch.nn.Module, keep: bool = True) -> dict[str, torch.Tensor]:
    """The sharded model's state dict gathered tensor by tensor (a collective: every rank calls it),
    on CPU under the model's own names; ranks with keep=False return {}."""
    full: dict[str, torch.Tensor] = {}
    for name, t in model.state_dict().items():
        t = t.full_tensor() if hasattr(t, "full_tensor") else t
        if keep:
            full[name] = t.detach().to("cpu").clone()
    return full


def hf_merged(model: torch.nn.Module, full: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A gathered state dict under plain HF names, LoRA merged (W + scaling * B @ A)."""
    if not full or not is_peft(model):
        return full
    out: dict[str, torch.Tensor] = {}
    scalings = lora_scalings(model)
    for name, t in full.items():
        if "lora_" in name:
            continue
        if name.endswith(".base_layer.weight"):
            mod = name[: -len(".base_layer.weight")]
            if mod in scalings:
                a, b = full[f"{mod}.lora_A.default.weight"], full[f"{mod}.lora_B.default.weight"]
                t = (t.float() + scalings[mod] * (b.float() @ a.float())).to(t.dtype)
        out[name.removeprefix("base_model.model.").replace(".base_layer.", ".")] = t
    return out


def full_hf_weights(model: torch.nn.Module, keep: bool = True) -> dict[str, torch.Tensor]:
    """Gather the sharded model (a collective: every rank calls it) into plain HF names on CPU,
    LoRA merged. Ranks with keep=False return {}."""
    return hf_merged(model, gathered_state(model, keep))


class ShardedTrainer:
    """One rank's trainer when the policy is sharded over `ranks`, driven by
    `cluster.ray_trainer.RemoteTrainer` (the loop's `train.protocol.TrainerBackend`): every rank makes
    every call, in the same order (each one runs collectives), and rank 0's results are the run's
    (stats are summed over ranks already). A weight sync is `train.weight_sync.rank_served_weights`
    on every rank. Nothing falls through to the inner `Trainer`."""

    def __init__(self, trainer: Trainer, ranks: Ranks):
        if trainer.ranks is not ranks:
            raise ValueError("ShardedTrainer: build the Trainer with ranks= (the same Ranks)")
        self.trainer, self.ranks = trainer, ranks

    @property
    def compute_dtype(self) -> torch.dtype | None:
        """The dtype the policy computes with (a weight sync serves it cast to this: train/weight_sync.py)."""
        return self.trainer.compute_dtype

    def update(self, batch: TrainBatch) -> UpdateStats:
        """Every rank on the same batch: each trains its share of the chunks (`assign_chunks`)."""
        return self.trainer.update(batch)

    def tree_values(self, flat: FlatTree) -> np.ndarray:
        raise ValueError("tree values need the PPO critic, which is not sharded yet (algorithm grpo or tree_grpo)")

    def named_weights(self) -> list[tuple[str, torch.Tensor]]:
        """The policy gathered (every rank takes part): rank 0 gets the plain HF weights, LoRA
        merged, on CPU; the other ranks get []."""
        return list(full_hf_weights(self.trainer.policy, keep=self.ranks.rank == 0).items())

    def save_checkpoint(self, run_dir: Path, step: int, source_dir: Path | None, keep: int) -> Path:
        """Every rank gathers the weights and the optimizer state; rank 0 writes the checkpoint
        (atomically, as `train.checkpoint.write_checkpoint` does); every rank returns once it is in place."""
        from harnessrl.train.checkpoint import checkpoint_dir, write_checkpoint

        rank0 = self.ranks.rank == 0
        full = gathered_state(self.trainer.policy, keep=rank0)
        state = self.state(full)
        if rank0:
            policy = self.trainer.policy
            write_checkpoint(run_dir, step, lambda out: save_gathered(policy, hf_merged(policy, full), out, source_dir),
                             state, keep)
        self.ranks.barrier()
        return checkpoint_dir(run_dir, step)

    def close(self) -> None:
        """Leave the group once every rank is done: a rank that destroys its process group while
        another still works (rank 0 writing its results) can abort in gloo and take the job down.
        Then collect the module/hook cycles that still hold the groups (FSDP state, the mesh), so
        their gloo threads end now rather than in interpreter teardown, where they can abort."""
        if dist.is_initialized():
            self.ranks.barrier()
            dist.destroy_process_group()
        gc.collect()

    def state(self, full: dict[str, torch.Tensor]) -> dict[str, Any]:
        """`Trainer.state()` of the whole group (a collective): the optimizer's full state dict
        (keyed by parameter name) and the LoRA adapters from `full` (gathered); rank 0's RNG."""
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

        t = self.trainer
        opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
        state: dict[str, Any] = {"optimizer": get_optimizer_state_dict(t.policy, t.optimizer, options=opts),
                                 "sharded": True, "torch_rng": torch.get_rng_state(),
                                 "python_rng": random.getstate(), "numpy_rng": np.random.get_state()}
        if is_peft(t.policy):
            state["adapters"] = {k: v for k, v in full.items() if "lora_" in k}
        return state

    def restore(self, state: dict[str, Any]) -> None:
        """Back to a saved `state()` on every rank (each reads the same checkpoint; a collective)."""
        from torch.distributed.checkpoint.state_dict import (StateDictOptions, set_model_state_dict,
                                                             set_optimizer_state_dict)

        if not state.get("sharded"):
            raise ValueError("this checkpoint was written by a one-process trainer: resume it with "
                             "cluster.ray.trainer_world_size=1")
        t = self.trainer
        opts = StateDictOptions(full_state_dict=True, strict=False)
        if "adapters" in state:
            set_model_state_dict(t.policy, state["adapters"], options=opts)
        set_optimizer_state_dict(t.policy, t.optimizer, optim_state_dict=state["optimizer"], options=opts)
        torch.set_rng_state(state["torch_rng"])
        random.setstate(state["python_rng"])
        np.random.set_state(state["numpy_rng"])


def save_gathered(policy: torch.nn.Module, state: dict[str, torch.Tensor], out_dir: Path, source_dir: Path | None) -> None:
    """Write gathered HF weights + config (+ tokenizer files of source_dir) as a plain HF dir."""
    import shutil

    from safetensors.torch import save_file

    from harnessrl.train.weights import base_model, checkpoint_tensors

    out_dir.mkdir(parents=True, exist_ok=True)
    model = base_model(policy)
    model.config.save_pretrained(out_dir)
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.save_pretrained(out_dir)
    tensors = {k: v.contiguous() for k, v in checkpoint_tensors(policy, state).items()}
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    if source_dir is not None:
        for f in Path(source_dir).iterdir():
            if f.is_file() and not f.name.endswith((".safetensors", ".bin", ".pt", ".gguf")) \
                    and not (out_dir / f.name).exists():
                shutil.copy2(f, out_dir / f.name)
