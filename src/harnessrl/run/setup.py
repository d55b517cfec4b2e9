"""Build the trainer side of a run from its config: policy (optionally LoRA), optimizer, frozen
reference, critic; save and restore their state for --resume."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import torch

from harnessrl.run.config import RunConfig
from harnessrl.train.critic import ValueModel
from harnessrl.train.packing import default_backend
from harnessrl.train.trainer import Trainer
from harnessrl.train.weights import apply_lora, is_peft


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def load_policy(cfg: RunConfig, weights_dir: Path):
    """The trainable causal LM (SDPA attention so a 4D tree mask works; flex on CUDA)."""
    from transformers import AutoModelForCausalLM

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    backend = _backend(cfg, device)
    attn = "flex_attention" if backend == "flex" else "sdpa"
    model = AutoModelForCausalLM.from_pretrained(str(weights_dir), dtype=getattr(torch, cfg.model.dtype),
                                                 attn_implementation=attn).to(device)
    if cfg.model.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    if cfg.model.lora is not None:
        lc = cfg.model.lora
        model = apply_lora(model, lc.r, lc.alpha, lc.dropout, lc.target_modules)
    return model


def _backend(cfg: RunConfig, device: torch.device) -> str:
    return default_backend(device) if cfg.model.attention == "auto" else cfg.model.attention


def build_trainer(cfg: RunConfig, policy, model_dir: Path) -> Trainer:
    """Optimizer over trainable parameters; reference (frozen copy, or LoRA's base); critic for ppo."""
    o = cfg.optimizer
    params = [p for p in policy.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=o.lr, weight_decay=o.weight_decay, betas=tuple(o.betas))
    device = next(policy.parameters()).device
    want_ref = cfg.algorithm.reference_model or cfg.algorithm.kl_coef > 0
    reference = None
    if want_ref and not is_peft(policy):  # the initial weights (also after a resume)
        from transformers import AutoModelForCausalLM

        attn = "flex_attention" if _backend(cfg, device) == "flex" else "sdpa"
        reference = AutoModelForCausalLM.from_pretrained(
            str(model_dir), dtype=getattr(torch, cfg.model.dtype), attn_implementation=attn).to(device).eval()
        for p in reference.parameters():
            p.requires_grad_(False)
    critic = critic_opt = None
    if cfg.algorithm.name == "ppo":
        critic = ValueModel.from_pretrained(str(model_dir), getattr(torch, cfg.model.dtype)).to(device)
        critic_opt = torch.optim.AdamW(critic.parameters(), lr=cfg.algorithm.critic_lr)
    return Trainer(policy, opt, cfg.algorithm, cfg.algorithm.token_budget, _backend(cfg, device),
                   grad_clip=o.grad_clip, epochs=cfg.algorithm.epochs, reference=reference, critic=critic,
                   critic_optimizer=critic_opt, use_lora_reference=want_ref and is_peft(policy))


def trainer_state(trainer: Trainer) -> dict:
    """Everything but the policy weights (those are in the HF dir): optimizer, adapters, critic, RNG."""
    state = {"optimizer": trainer.optimizer.state_dict(), "torch_rng": torch.get_rng_state(),
             "python_rng": random.getstate(), "numpy_rng": np.random.get_state()}
    if is_peft(trainer.policy):
        state["adapters"] = {k: v for k, v in trainer.policy.state_dict().items() if "lora_" in k}
    if trainer.critic is not None:
        state["critic"] = trainer.critic.state_dict()
        state["critic_optimizer"] = trainer.critic_optimizer.state_dict()
    return state


def restore_trainer(trainer: Trainer, state: dict) -> None:
    trainer.optimizer.load_state_dict(state["optimizer"])
    if "adapters" in state:
        trainer.policy.load_state_dict(state["adapters"], strict=False)
    if "critic" in state and trainer.critic is not None:
        trainer.critic.load_state_dict(state["critic"])
        trainer.critic_optimizer.load_state_dict(state["critic_optimizer"])
    torch.set_rng_state(state["torch_rng"])
    random.setstate(state["python_rng"])
    np.random.set_state(state["numpy_rng"])
