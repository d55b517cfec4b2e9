"""Small builders shared by the train tests (a tiny random llama; random branching paths; the
per-token fields of a forest built from paths)."""

from __future__ import annotations

import random
from typing import NamedTuple

import numpy as np
import torch

from harnessrl.train.packing import Forest, forest_from_paths


def tiny_llama(seed: int = 0, vocab: int = 64, tie: bool = False):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(
        vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        attn_implementation="sdpa", tie_word_embeddings=tie,
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


class PathFields(NamedTuple):
    """A forest built from paths, each path's token indices, and the per-token training fields."""

    forest: Forest
    idx: list[np.ndarray]
    decision: np.ndarray
    adv_pos: np.ndarray
    adv_neg: np.ndarray
    weight: np.ndarray


def path_fields(paths: list[list[int]], adv: list[float]) -> PathFields:
    """The forest of `paths` with a decision token wherever a non-root token's id is not a multiple
    of 3; every path through a decision token adds 1 to its weight and its advantage to adv_pos or
    adv_neg (by sign)."""
    forest, idx = forest_from_paths(paths)
    n = len(forest)
    decision = (forest.ids % 3 != 0) & (forest.parent >= 0)
    a_pos, a_neg, w = np.zeros(n, np.float32), np.zeros(n, np.float32), np.zeros(n, np.float32)
    for ix, a in zip(idx, adv):
        seen = ix[decision[ix]]
        w[seen] += 1.0
        (a_pos if a > 0 else a_neg)[seen] += a
    return PathFields(forest, idx, decision, a_pos, a_neg, w)
