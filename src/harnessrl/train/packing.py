"""Tree packing: one forward pass over a prefix tree, each token attending only to its ancestors.

A *forest* is every token of one or more prefix trees flattened in DFS pre-order, each token
naming its parent token (-1 at a root). In that order a token's subtree is the contiguous range
[i, tout[i]), so "k is an ancestor-or-self of q" is `k <= q < tout[k]` (docs/training.md). Position
ids are the depth of a token on its own root-to-leaf path, so siblings repeat positions and RoPE
sees exactly what it sees when each path is run alone. Every shared token is computed once.

Long forests are split into chunks under a token budget. A chunk is a contiguous DFS range
[a, b) plus the ancestor path of its first token: any contiguous DFS range is closed under
ancestors except for that path, so the chunk is self-contained. The path is *recomputed* (not
KV-reused): its tokens are context in that chunk (no loss) and gradients still flow through them,
so summing chunk gradients gives exactly the gradient of the whole forest. Cuts are placed at
node starts (branch points), the shallowest one that leaves the chunk at least half the budget (a
tree's root best: the next chunk recomputes nothing), so the recomputed paths are short.

Backends: SDPA with a dense boolean [1, 1, L, L] mask (CPU and GPU; memory O(L^2), hence the
budget) or flex_attention with a block-sparse mask on CUDA (flex has no backward on CPU). With an
arbitrary mask SDPA's CPU kernel computes every one of the L x L scores, twice what a causal
sequence costs and far more than a tree needs (a branch never attends its siblings), so "sdpa"
runs it per block of BLOCK queries over only the keys that block can see (`block_tree_attention`:
the same scores, softmax and gradients); "sdpa-dense" is the one dense call, kept for the benchmark.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from harnessrl.errors import HarnessRLError


class ForestOrderError(HarnessRLError, ValueError):
    """The parent array is not a DFS pre-order (a parent after its child, or a subtree split)."""


@dataclass(frozen=True)
class Forest:
    """Token ids in DFS pre-order with the index of each token's parent (-1 for a root)."""

    ids: np.ndarray  # int64 [N]
    parent: np.ndarray  # int64 [N]

    def __post_init__(self) -> None:
        if self.ids.shape != self.parent.shape or self.ids.ndim != 1:
            raise ValueError(f"ids {self.ids.shape} and parent {self.parent.shape} must be equal 1-D shapes")

    def __len__(self) -> int:
        return int(self.ids.shape[0])


def dfs_layout(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Depth (position id) and subtree end `tout` of every token; checks the DFS pre-order."""
    n = len(parent)
    depth = np.zeros(n, dtype=np.int64)
    tout = np.zeros(n, dtype=np.int64)
    stack: list[int] = []
    for j in range(n):
        p = int(parent[j])
        while stack and stack[-1] != p:
            tout[stack.pop()] = j
        if p >= 0 and not stack:
            raise ForestOrderError(f"token {j}: parent {p} is not on the current DFS path")
        depth[j] = depth[p] + 1 if p >= 0 else 0
        stack.append(j)
    for k in stack:
        tout[k] = n
    return depth, tout


def ancestor_path(parent: np.ndarray, i: int) -> list[int]:
    """Indices of the strict ancestors of token i, root first."""
    path = []
    p = int(parent[i])
    while p >= 0:
        path.append(p)
        p = int(parent[p])
    return path[::-1]


def split_forest(parent: np.ndarray, budget: int) -> list[tuple[np.ndarray, int]]:
    """Chunks of at most ~budget tokens: (global token indices, number of recomputed prefix tokens).

    Each chunk owns a contiguous DFS range and carries the ancestor path of its first token in
    front. Where that path is longer than budget/2 (a harness's long system prompt and history
    above the branches), the chunk still owns at least budget/2 tokens: it runs over budget (at
    most path + budget/2 tokens) rather than recomputing the long path for every few owned tokens.
    A chunk ends at the node start with the shortest ancestor path (the latest of equals) among
    those that leave it budget/2 tokens or more, else at the last node start that fits: the next
    chunk recomputes that path (on make demo's batches 1.3% of the tokens, where the last node
    start that fits recomputed 12%).
    """
    n = len(parent)
    if n <= budget:
        return [(np.arange(n, dtype=np.int64), 0)]
    cut_ok = np.ones(n, dtype=bool)  # node starts: a token whose parent is not its predecessor
    cut_ok[1:] = parent[1:] != np.arange(n - 1)
    depth = dfs_layout(parent)[0]  # a cut at token c recomputes its depth[c] ancestors
    chunks, a = [], 0
    min_owned = max(1, budget // 2)
    while a < n:
        anc = ancestor_path(parent, a)
        b = min(a + max(budget - len(anc), min_owned), n)
        if b < n:
            cands = np.flatnonzero(cut_ok[a + 1 : b + 1]) + a + 1
            late = cands[cands >= a + min_owned]
            if len(late):
                d = depth[late]
                b = int(late[np.flatnonzero(d == d.min())[-1]])
            elif len(cands):
                b = int(cands[-1])
        index = np.concatenate([np.asarray(anc, dtype=np.int64), np.arange(a, b, dtype=np.int64)])
        chunks.append((index, len(anc)))
        a = b
    return chunks


@dataclass(frozen=True)
class PackedChunk:
    """One model input: tokens at `index` (global forest indices) with the tree mask layout."""

    index: np.ndarray  # global token index per position [L]
    ids: torch.Tensor  # [L] long
    position_ids: torch.Tensor  # [L] long (depth on the root-to-leaf path)
    tout: torch.Tensor  # [L] long, local subtree ends
    pred_pos: torch.Tensor  # [L] long, local position whose logits predict this token (-1: none)
    owned: torch.Tensor  # [L] bool, tokens this chunk trains (False on the recomputed prefix)

    def __len__(self) -> int:
        return int(self.index.shape[0])


def pack_chunk(forest: Forest, index: np.ndarray, n_prefix: int) -> PackedChunk:
    """Build the model input for the tokens `index` (first n_prefix of them are recomputed context)."""
    local = -np.ones(len(forest), dtype=np.int64)
    local[index] = np.arange(len(index))
    gpar = forest.parent[index]
    lpar = np.where(gpar >= 0, local[gpar.clip(min=0)], -1)
    if np.any((gpar >= 0) & (lpar < 0)):
        raise ForestOrderError("chunk is not closed under ancestors")
    depth, tout = dfs_layout(lpar)  # chunks start at a root, so local depth == path depth
    owned = np.zeros(len(index), dtype=bool)
    owned[n_prefix:] = True
    return PackedChunk(
        index=index,
        ids=torch.as_tensor(forest.ids[index], dtype=torch.long),
        position_ids=torch.as_tensor(depth, dtype=torch.long),
        tout=torch.as_tensor(tout, dtype=torch.long),
        pred_pos=torch.as_tensor(lpar, dtype=torch.long),
        owned=torch.as_tensor(owned),
    )


def pack_forest(forest: Forest, budget: int, breaks: Sequence[int] = ()) -> list[PackedChunk]:
    """Split a forest under `budget` tokens per chunk and build each chunk's model input. `breaks`:
    token indices, each a tree's root, where a chunk must start (no chunk holds tokens from both
    sides of one; the trainer breaks where the batch's trees change harness)."""
    n = len(forest)
    bounds = [0, *sorted({int(b) for b in breaks if 0 < b < n}), n]
    chunks = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        parent = forest.parent[a:b]
        if np.any((parent >= 0) & (parent < a)):
            raise ForestOrderError(f"a chunk break at token {a} is inside a tree (breaks go at tree roots)")
        local = np.where(parent >= 0, parent - a, -1)
        chunks += [pack_chunk(forest, index + a, n_prefix) for index, n_prefix in split_forest(local, budget)]
    return chunks


def tree_mask(tout: torch.Tensor) -> torch.Tensor:
    """Boolean [L, L] mask: query q may attend key k iff k <= q < tout[k]."""
    ar = torch.arange(tout.shape[0], device=tout.device)
    return (ar[None, :] <= ar[:, None]) & (ar[:, None] < tout[None, :])


def attention_input(chunk: PackedChunk, device: torch.device, backend: str = "sdpa") -> Any:
    """The attention_mask argument for a transformers causal LM: 4D bool (sdpa) or a BlockMask (flex)."""
    tout = chunk.tout.to(device)
    if backend == "flex":
        from torch.nn.attention.flex_attention import create_block_mask

        def mask_mod(b: torch.Tensor, h: torch.Tensor, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:  # noqa: ARG001
            return (k <= q) & (q < tout[k])

        n = len(chunk)
        return create_block_mask(mask_mod, B=None, H=None, Q_LEN=n, KV_LEN=n, device=device)
    return tree_mask(tout)[None, None]


BLOCK = 256  # queries per block of block_tree_attention
TREE_ATTENTION = "harnessrl_block_tree"  # its name among transformers' attention functions


def block_tree_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                         attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                         **kwargs: Any) -> tuple[torch.Tensor, None]:
    """A transformers attention function: SDPA per block of BLOCK queries over the key columns the
    tree mask lets that block see (a column no query of the block attends contributes nothing).
    query [B, Hq, L, D], key / value [B, Hkv, L, D], attention_mask bool [1, 1, L, L]; returns
    ([B, L, Hq, D], None) like transformers' sdpa_attention_forward, which it defers to on any
    other mask (or none)."""
    from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

    if attention_mask is None or attention_mask.dtype != torch.bool or attention_mask.dim() != 4 \
            or attention_mask.shape[0] != 1 or attention_mask.shape[1] != 1:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, **kwargs)
    n_rep = query.shape[1] // key.shape[1]
    key, value = repeat_kv(key, n_rep), repeat_kv(value, n_rep)
    mask = attention_mask[0, 0]
    n = query.shape[2]
    outs = []
    for a in range(0, n, BLOCK):
        b = min(a + BLOCK, n)
        m = mask[a:b, :b]  # a DFS tree mask is causal: no key after the block's last query
        cols = torch.nonzero(m.any(0))[:, 0]
        if len(cols) == b:
            k, v = key[:, :, :b], value[:, :, :b]
        else:
            k, v, m = key.index_select(2, cols), value.index_select(2, cols), m[:, cols]
        outs.append(torch.nn.functional.scaled_dot_product_attention(
            query[:, :, a:b], k, v, attn_mask=m[None, None], dropout_p=dropout if module.training else 0.0,
            scale=scaling))
    return torch.cat(outs, dim=2).transpose(1, 2).contiguous(), None


@contextmanager
def model_attention(model: torch.nn.Module, backend: str) -> Iterator[None]:
    """Inside the block a transformers model loaded with sdpa runs `block_tree_attention` when
    `backend` is "sdpa" (registered with transformers under TREE_ATTENTION on first use); any other
    backend or model: unchanged. A backward through gradient-checkpointed layers recomputes their
    forward, so it runs inside the block too (or the recomputation would use plain sdpa)."""
    config: Any = getattr(model, "config", None)
    if backend != "sdpa" or getattr(config, "_attn_implementation", None) != "sdpa":
        yield
        return
    from transformers import AttentionInterface

    if TREE_ATTENTION not in AttentionInterface._global_mapping:
        AttentionInterface.register(TREE_ATTENTION, block_tree_attention)
    config._attn_implementation = TREE_ATTENTION
    try:
        yield
    finally:
        config._attn_implementation = "sdpa"


def forward_hidden(model: torch.nn.Module, chunk: PackedChunk, backend: str = "sdpa") -> torch.Tensor:
    """Last hidden states [L, H] of a packed chunk (for a value head)."""
    device = next(model.parameters()).device
    with model_attention(model, backend):
        out = model(
            input_ids=chunk.ids[None].to(device),
            attention_mask=attention_input(chunk, device, backend),
            position_ids=chunk.position_ids[None].to(device),
            use_cache=False,
        )
    return out.last_hidden_state[0]


def token_logprobs(
    model: torch.nn.Module,
    chunk: PackedChunk,
    targets: torch.Tensor,
    temperature: torch.Tensor,
    backend: str = "sdpa",
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """log p(token | its ancestors) at local positions `targets`, logits divided by per-token T.

    Only the positions that predict a target are projected to the vocabulary (logits_to_keep),
    so the [L, V] logits tensor is never built.
    """
    device = next(model.parameters()).device
    pred = chunk.pred_pos[targets]
    if torch.any(pred < 0):
        raise ValueError("a root token has no prediction; roots must be context tokens")
    with model_attention(model, backend):
        out = model(
            input_ids=chunk.ids[None].to(device),
            attention_mask=attention_input(chunk, device, backend),
            position_ids=chunk.position_ids[None].to(device),
            logits_to_keep=pred.to(device),
            use_cache=False,
        )
    logits = out.logits[0].float() / temperature.to(device)[:, None]
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(1, chunk.ids[targets].to(device)[:, None])[:, 0]
    entropy = None
    if with_entropy:
        with torch.no_grad():
            entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


def default_backend(device: torch.device) -> str:
    """flex_attention where it has a backward (CUDA), else SDPA with a dense tree mask."""
    return "flex" if device.type == "cuda" else "sdpa"


def attention_backend(setting: str, device: torch.device) -> str:
    """The one place the trainer's attention backend is decided: `model.attention` ("auto": flex on
    CUDA, else sdpa; or "sdpa" / "flex" as set)."""
    return default_backend(device) if setting == "auto" else setting


def hf_attention(backend: str) -> str:
    """The `attn_implementation` a transformers model is loaded with for a packing backend."""
    return "flex_attention" if backend == "flex" else "sdpa"


def forest_from_paths(paths: list[list[int]]) -> tuple[Forest, list[np.ndarray]]:
    """Token trie of root-to-leaf sequences in DFS order, and each path's forest token indices.

    Paths with a common prefix share its tokens; used by tests, benchmarks and baselines.
    """
    children: list[dict[int, int]] = [{}]  # trie node 0 is a virtual root
    tok: list[int] = [-1]
    path_nodes = []
    for seq in paths:
        node, nodes = 0, []
        for t in seq:
            nxt = children[node].get(int(t))
            if nxt is None:
                nxt = len(tok)
                children[node][int(t)] = nxt
                children.append({})
                tok.append(int(t))
            nodes.append(nxt)
            node = nxt
        path_nodes.append(nodes)
    order = -np.ones(len(tok), dtype=np.int64)
    ids: list[int] = []
    parent: list[int] = []
    stack = [(c, -1) for c in reversed(list(children[0].values()))]
    while stack:
        node, par = stack.pop()
        order[node] = len(ids)
        ids.append(tok[node])
        parent.append(par)
        stack.extend((c, order[node]) for c in reversed(list(children[node].values())))
    forest = Forest(np.asarray(ids, dtype=np.int64), np.asarray(parent, dtype=np.int64))
    return forest, [order[np.asarray(n, dtype=np.int64)] for n in path_nodes]
