"""Build the trainer side of a run from its config: policy (optionally LoRA), optimizer, frozen
reference, critic, restored from a checkpoint for --resume (`make_trainer`; the Ray backend calls
it inside its trainer actor, and `make_sharded_trainer` inside each of its trainer ranks when
cluster.ray.trainer_world_size > 1)."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import torch

from harnessrl.engine.factory import resolved_dtype
from harnessrl.config import RunConfig
from harnessrl.train.critic import ValueModel
from harnessrl.train.checkpoint import load_trainer_state
from harnessrl.train.fsdp import Ranks, ShardedTrainer, init_ranks, shard_model
from harnessrl.train.packing import attention_backend, hf_attention
from harnessrl.train.settings import resolve_compute_dtype
from harnessrl.train.trainer import Trainer
from harnessrl.train.weights import apply_lora, is_peft


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def load_policy(cfg: RunConfig, weights_dir: Path) -> torch.nn.Module:
    """The trainable causal LM (SDPA attention so a 4D tree mask works; flex on CUDA)."""
    from transformers import AutoModelForCausalLM

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    attn = hf_attention(attention_backend(cfg.model.attention, device))
    model = AutoModelForCausalLM.from_pretrained(str(weights_dir), dtype=getattr(torch, cfg.model.dtype),
                                                 attn_implementation=attn).to(device)
    if cfg.model.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    if cfg.model.lora is not None:
        lc = cfg.model.lora
        model = apply_lora(model, lc.r, lc.alpha, lc.dropout, lc.target_modules)
    return model


def build_trainer(cfg: RunConfig, policy: torch.nn.Module, model_dir: Path, ranks: Ranks | None = None) -> Trainer:
    """Optimizer over trainable parameters; reference (frozen copy, or LoRA's base); critic for ppo.
    `ranks`: the policy is sharded over them already (the optimizer holds this rank's shards)."""
    o = cfg.optimizer
    params = [p for p in policy.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=o.lr, weight_decay=o.weight_decay, betas=tuple(o.betas))
    device = next(policy.parameters()).device
    backend = attention_backend(cfg.model.attention, device)
    want_ref = cfg.algorithm.reference_model or cfg.algorithm.kl_coef > 0  # else no reference forward at all
    compute = compute_dtype(cfg)
    reference = None
    if want_ref and not is_peft(policy):  # the initial weights (also after a resume)
        from transformers import AutoModelForCausalLM

        # frozen: held in the compute dtype itself (the same rounding as a cast, done once)
        reference = AutoModelForCausalLM.from_pretrained(
            str(model_dir), dtype=compute or getattr(torch, cfg.model.dtype),
            attn_implementation=hf_attention(backend)).to(device).eval()
        for p in reference.parameters():
            p.requires_grad_(False)
    critic = critic_opt = None
    if cfg.algorithm.name == "ppo":
        critic = ValueModel.from_pretrained(str(model_dir), getattr(torch, cfg.model.dtype)).to(device)
        critic_opt = torch.optim.AdamW(critic.parameters(), lr=cfg.algorithm.critic_lr)
    return Trainer(policy, opt, cfg.algorithm, cfg.algorithm.token_budget, backend,
                   grad_clip=o.grad_clip, epochs=cfg.algorithm.epochs, reference=reference, critic=critic,
                   critic_optimizer=critic_opt, use_lora_reference=want_ref and is_peft(policy), ranks=ranks,
                   harness_grad_cosine=cfg.algorithm.harness_grad_cosine, compute_dtype=compute)


def compute_dtype(cfg: RunConfig) -> torch.dtype | None:
    """The trainer's compute dtype over the master weights (`model.compute_dtype`, auto: the dtype
    the engine serves in when it is bf16); None when it is the weights' own."""
    name = resolve_compute_dtype(cfg.model.compute_dtype, cfg.model.dtype, resolved_dtype(cfg.engine))
    return None if name == cfg.model.dtype else getattr(torch, name)


def make_trainer(cfg: RunConfig, weights_dir: Path, model_dir: Path, ckpt_dir: Path | None,
                 seed: int | None = None) -> Trainer:
    """The run's Trainer: policy from weights_dir, built as `build_trainer` does, restored from the
    checkpoint in ckpt_dir when resuming. `seed`: seed this process's RNGs first (a fresh process,
    e.g. the Ray trainer actor; the loop seeds its own)."""
    if seed is not None:
        seed_everything(seed)
    trainer = build_trainer(cfg, load_policy(cfg, weights_dir), model_dir)
    if ckpt_dir:
        state = load_trainer_state(ckpt_dir)
        if state.get("sharded"):
            raise ValueError(f"{ckpt_dir} was written by a sharded trainer: resume it with "
                             "cluster.ray.trainer_world_size > 1")
        trainer.restore(state)
    return trainer


def make_sharded_trainer(cfg: RunConfig, weights_dir: Path, model_dir: Path, ckpt_dir: Path | None,
                         seed: int | None = None) -> ShardedTrainer:
    """One trainer rank (in a process whose env names its rank: RANK, WORLD_SIZE, MASTER_ADDR/PORT,
    LOCAL_RANK, as the Ray trainer actors set it): join the group, load the policy, shard it
    (FSDP2 casts to the compute dtype itself), build the trainer as `build_trainer` does, restore
    the checkpoint's state when resuming. A collective: every rank calls it."""
    from torch.distributed.fsdp import MixedPrecisionPolicy

    if seed is not None:
        seed_everything(seed)
    ranks = init_ranks()
    compute = compute_dtype(cfg)
    mp = None if compute is None else MixedPrecisionPolicy(param_dtype=compute, reduce_dtype=torch.float32)
    policy = shard_model(load_policy(cfg, weights_dir), ranks, mp)
    trainer = ShardedTrainer(build_trainer(cfg, policy, model_dir, ranks), ranks)
    if ckpt_dir:
        trainer.restore(load_trainer_state(ckpt_dir))
    return trainer
