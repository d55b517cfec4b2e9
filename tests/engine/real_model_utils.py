"""Helpers shared by the real-model engine tests (SmolLM2): chat prompts and HF reference logprobs."""

from __future__ import annotations

from pathlib import Path

import torch


def chat_prompt_ids(model_dir: Path, text: str) -> list[int]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    ids = tok.apply_chat_template(
        [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=True
    )
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def hf_logprobs(model, prompt: list[int], completion: list[int], temperature: float) -> torch.Tensor:
    """log_softmax(logits / T) of each completion token under an HF model (T <= 0 -> 1)."""
    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1].float()
    scale = temperature if temperature > 0 else 1.0
    return torch.log_softmax(logits / scale, dim=-1).gather(-1, torch.tensor(completion)[:, None])[:, 0]


def perturbed_state(model, scale: float = 0.02, seed: int = 0) -> dict[str, torch.Tensor]:
    """A copy of the attention/MLP weights plus seeded noise (HF names)."""
    gen = torch.Generator().manual_seed(seed)
    return {
        name: t.detach().clone() + scale * torch.randn(t.shape, generator=gen)
        for name, t in model.state_dict().items()
        if ".mlp." in name or ".self_attn." in name
    }
