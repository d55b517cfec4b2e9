"""Value model for PPO with a critic: its own copy of the base transformer plus a scalar head.

Values are evaluated once per tree token with the same tree packing as the policy (each token
sees only its ancestors, so a shared token's value is the value of its prefix, identical on every
path). GAE runs along each root-to-leaf path in algo/; the critic is trained here on the returns,
with the per-token weight/mean-return form that equals training every path separately
(losses.value_loss).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from harnessrl.train.packing import Forest, PackedChunk, forward_hidden, pack_forest


class ValueModel(nn.Module):
    """Backbone (AutoModel, no LM head) + Linear(hidden, 1), initialised to output 0."""

    def __init__(self, backbone: nn.Module, hidden_size: int):
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    @classmethod
    def from_pretrained(cls, path: str, dtype: torch.dtype = torch.float32) -> ValueModel:
        from transformers import AutoModel

        backbone = AutoModel.from_pretrained(path, dtype=dtype, attn_implementation="sdpa")
        return cls(backbone, backbone.config.hidden_size)

    def chunk_values(self, chunk: PackedChunk, backend: str = "sdpa") -> torch.Tensor:
        """Values [L] of every token of a packed chunk."""
        hidden = forward_hidden(self.backbone, chunk, backend)
        return self.head(hidden.float())[:, 0]


def forest_values(critic: ValueModel, forest: Forest, budget: int, backend: str = "sdpa") -> np.ndarray:
    """float32 [N]: value of the state each token is sampled from (read at its parent token, as
    the logits that score it; 0 for a first token), every position computed once (no grad).
    This is the `values` argument of algo.gae."""
    out = np.zeros(len(forest), dtype=np.float32)
    with torch.no_grad():
        for chunk in pack_forest(forest, budget):
            v = critic.chunk_values(chunk, backend).cpu().numpy()
            own = chunk.owned.numpy() & (chunk.pred_pos.numpy() >= 0)
            out[chunk.index[own]] = v[chunk.pred_pos.numpy()[own]]
    return out
