"""Small builders shared by the train tests (a tiny random llama; random branching paths)."""

from __future__ import annotations

import random

import torch


def tiny_llama(seed: int = 0, vocab: int = 64):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        attn_implementation="sdpa",
    )
    return LlamaForCausalLM(cfg).float()


def branching_paths(seed: int, n_paths: int = 5, vocab: int = 64) -> list[list[int]]:
    """Paths that share prefixes of random lengths (a multi-level tree)."""
    rng = random.Random(seed)
    paths = [[rng.randrange(vocab) for _ in range(rng.randint(8, 20))]]
    for _ in range(n_paths - 1):
        base = rng.choice(paths)
        cut = rng.randint(1, len(base) - 1)
        paths.append(base[:cut] + [rng.randrange(vocab) for _ in range(rng.randint(3, 15))])
    return paths
