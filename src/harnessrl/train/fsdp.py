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

Process layout (torchrun, or Ray actors that set the same env): rank 0 runs the RL loop and holds a
`ShardedTrainer`, which broadcasts each call (update, weights, checkpoint, stop) to the other ranks
over a gloo control group; ranks > 0 sit in `follow`. Data collectives use NCCL on GPUs and gloo
on CPU. Weights for engine sync and HF checkpoints are gathered tensor by tensor (`full_tensor`),
LoRA adapters merged into the base weights on the gathered copy.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import torch
import torch.distributed as dist

from harnessrl.train.update_stats import UpdateStats
from harnessrl.train.weights import is_peft


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

    def broadcast(self, obj: Any = None) -> Any:
        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self.control)
        return box[0]


def init_ranks(backend: str | None = None) -> Ranks:
    """Join the process group described by torchrun's env (RANK, WORLD_SIZE, MASTER_ADDR/PORT);
    NCCL when CUDA is there, else gloo; a gloo control group for objects; a 1-D device mesh."""
    from torch.distributed.device_mesh import init_device_mesh

    if not dist.is_initialized():
        cuda = torch.cuda.is_available()
        backend = backend or ("nccl" if cuda else "gloo")
        if cuda:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend)
    world, rank = dist.get_world_size(), dist.get_rank()
    control = dist.new_group(backend="gloo") if dist.get_backend() != "gloo" else None
    mesh = init_device_mesh("cuda" if dist.get_backend() == "nccl" else "cpu", (world,))
    return Ranks(rank, world, control, mesh)


def decoder_layers(model) -> list[torch.nn.Module]:
    """The transformer blocks of a transformers causal LM (through a peft wrapper)."""
    base = model.get_base_model() if is_peft(model) else model
    inner = getattr(base, "model", None)
    layers = getattr(inner, "layers", None)
    if layers is None:
        raise ValueError(f"{type(base).__name__}: no .model.layers to shard (a decoder-only transformers model?)")
    return list(layers)


def shard_model(model, ranks: Ranks, mp_policy=None):
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


def lora_scalings(model) -> dict[str, float]:
    """{module name: scaling} of peft LoRA layers (adapter 'default')."""
    out = {}
    for name, mod in model.named_modules():
        sc = getattr(mod, "scaling", None)
        if isinstance(sc, dict) and "default" in sc and hasattr(mod, "lora_A"):
            out[name] = float(sc["default"])
    return out


def full_hf_weights(model, keep: bool = True) -> dict[str, torch.Tensor]:
    """Gather the sharded model tensor by tensor (a collective: every rank calls it) into plain HF
    names on CPU, LoRA merged (W + scaling * B @ A). Ranks with keep=False return {}."""
    full: dict[str, torch.Tensor] = {}
    for name, t in model.state_dict().items():
        t = t.full_tensor() if hasattr(t, "full_tensor") else t
        if keep:
            full[name] = t.detach().to("cpu").clone()
    if not keep or not is_peft(model):
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


class ShardedTrainer:
    """Rank 0's trainer when the policy is sharded: each call is broadcast to the ranks in `follow`
    and run on every rank. Offers what the loop uses of `Trainer`."""

    def __init__(self, trainer, ranks: Ranks):
        if ranks.rank != 0:
            raise ValueError("ShardedTrainer runs on rank 0; other ranks call follow()")
        self.trainer, self.ranks = trainer, ranks

    def __getattr__(self, name: str) -> Any:  # policy, token_budget, backend, critic, optimizer ...
        return getattr(self.__dict__["trainer"], name)

    def update(self, batch) -> UpdateStats:
        self.ranks.broadcast(("update", batch))
        return self.trainer.update(batch)

    def named_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        self.ranks.broadcast(("weights", None))
        return iter(full_hf_weights(self.trainer.policy).items())

    def save_policy(self, out_dir: Path, source_dir: Path | None) -> None:
        """Gather and write a plain HF directory (rank 0 writes)."""
        self.ranks.broadcast(("weights", None))
        save_gathered(self.trainer.policy, full_hf_weights(self.trainer.policy), Path(out_dir), source_dir)

    def close(self) -> None:
        self.ranks.broadcast(("stop", None))


def follow(trainer, ranks: Ranks) -> None:
    """Ranks > 0: run what rank 0 broadcasts until it says stop."""
    while True:
        op, arg = ranks.broadcast()
        if op == "stop":
            return
        if op == "update":
            trainer.update(arg)
        elif op == "weights":
            full_hf_weights(trainer.policy, keep=False)
        else:
            raise ValueError(f"unknown trainer op {op!r}")


def save_gathered(policy, state: dict[str, torch.Tensor], out_dir: Path, source_dir: Path | None) -> None:
    """Write gathered HF weights + config (+ tokenizer files of source_dir) as a plain HF dir."""
    import shutil

    from safetensors.torch import save_file

    from harnessrl.train.weights import base_model

    out_dir.mkdir(parents=True, exist_ok=True)
    model = base_model(policy)
    model.config.save_pretrained(out_dir)
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.save_pretrained(out_dir)
    tied = getattr(model.config, "tie_word_embeddings", False)
    tensors = {k: v.contiguous() for k, v in state.items() if not (tied and k == "lm_head.weight")}
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    if source_dir is not None:
        for f in Path(source_dir).iterdir():
            if f.is_file() and not f.name.endswith((".safetensors", ".bin", ".pt", ".gguf")) \
                    and not (out_dir / f.name).exists():
                shutil.copy2(f, out_dir / f.name)
