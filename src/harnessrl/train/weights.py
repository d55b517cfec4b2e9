"""Policy weights under plain HF names (LoRA merged), for engine sync and HF checkpoints."""

from __future__ import annotations

from typing import Iterator

import torch


def is_peft(model: torch.nn.Module) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "merge_adapter")


def hf_named_weights(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) pairs as the base HF model names them; LoRA adapters merged in (copies)."""
    if not is_peft(model):
        for name, t in model.state_dict().items():
            yield name, t.detach()
        return
    model.merge_adapter()
    try:
        merged = {}
        for name, t in model.state_dict().items():
            if "lora_" in name:
                continue
            clean = name.removeprefix("base_model.model.").replace(".base_layer.", ".")
            merged[clean] = t.detach().clone()
    finally:
        model.unmerge_adapter()
    yield from merged.items()


def base_model(model: torch.nn.Module) -> torch.nn.Module:
    """The underlying transformers model (for its config and save_pretrained)."""
    return model.get_base_model() if is_peft(model) else model


def checkpoint_tensors(model: torch.nn.Module, state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tensors a plain HF checkpoint of `model` stores: `state` less lm_head.weight when the
    config ties it to the input embedding (transformers re-ties it on load; a merged LoRA state
    would otherwise store the vocabulary matrix twice)."""
    tied = getattr(base_model(model).config, "tie_word_embeddings", False)
    return {k: v for k, v in state.items() if not (tied and k == "lm_head.weight")}


def apply_lora(model: torch.nn.Module, r: int, alpha: int, dropout: float, target_modules: list[str]) -> torch.nn.Module:
    """Wrap a causal LM with peft LoRA adapters (only the adapters train)."""
    from peft import LoraConfig, get_peft_model

    cfg = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=target_modules,
                     task_type="CAUSAL_LM")
    return get_peft_model(model, cfg)
