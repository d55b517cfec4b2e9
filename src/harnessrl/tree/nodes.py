"""The prefix tree of one group: nodes (token spans), paths, rollouts, and flat per-token views.

Shape (stable; the trainer packs from it):

- ``PrefixTree.nodes``: DFS pre-order; ``nodes[0]`` is the root, an empty span. A node's span holds
  per-token arrays: ``tokens`` (int32), ``decision`` (bool: sampled by the policy in some kept call
  on this path), ``engine_logprobs`` (float32, nan on context), ``temperature`` (float32, 1.0 on
  context so dividing logits by it everywhere is harmless), ``policy_version`` (int32, -1 on
  context), ``provenance`` (int32: the recorded prompt provenance, ``PROMPT`` = -1 for harness text
  or the version that sampled it; for views). ``start_pos`` is the position of the span's first
  token within its root-to-leaf sequence (RoPE position ids), ``depth`` the node depth (root 0).
- Every call's sequence (prompt ids + sampled ids) ends at a node end and its completion starts
  at a node start, so the set of rollouts through a node (``node.rollouts``) and the set of
  rollouts that sampled it (``node.decision_rollouts``) hold for every token of its span.
- ``PrefixTree.paths``: one ``Path`` per (rollout, end node): the root-to-end node chain of a
  sequence the rollout's calls produced and did not extend further. A rollout whose history was
  rewritten (compaction, sub-agents, retries) has several paths.
- ``PrefixTree.rollouts``: reward, status, harness, kept/filtered of each rollout in the group.
- ``PrefixTree.flat()``: the same tokens as flat arrays in DFS order (see ``FlatTree``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from numpy.typing import DTypeLike

from harnessrl.tree.stats import TreeStats


@dataclass
class Node:
    id: int
    parent: int  # -1 for the root
    tokens: np.ndarray  # int32 [n]
    decision: np.ndarray  # bool [n]
    engine_logprobs: np.ndarray  # float32 [n], nan on context
    temperature: np.ndarray  # float32 [n], 1.0 on context
    policy_version: np.ndarray  # int32 [n], -1 on context
    provenance: np.ndarray  # int32 [n], recorded provenance (-1 harness text, else sampling version)
    start_pos: int
    depth: int
    children: list[int] = field(default_factory=list)
    rollouts: tuple[str, ...] = ()  # every rollout (kept or filtered) whose calls pass through
    # rollouts for which this span is a decision (a trainable call of theirs sampled it); nodes are
    # cut at every call's first sampled token, so this holds for every token of the span
    decision_rollouts: tuple[str, ...] = ()
    call_ends: tuple[str, ...] = ()  # call ids whose sequence ends at the end of this span
    branch_reason: str = ""  # why this node starts a branch ("" for the root or a continuation)
    # float32 [n]: loss weight of each decision token (1; filters.side_call_weight on the decisions of
    # side calls with filters.side_calls = weight); None: all 1
    loss_weight: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def end_pos(self) -> int:
        return self.start_pos + len(self)


@dataclass(frozen=True)
class Path:
    index: int
    rollout_id: str
    nodes: tuple[int, ...]  # root (0) .. end node
    n_tokens: int  # length of the root-to-end sequence

    @property
    def end(self) -> int:
        return self.nodes[-1]


@dataclass(frozen=True)
class RolloutInfo:
    rollout_id: str
    harness: str
    status: str
    reward: float | None
    kept: bool  # False: excluded from the loss (no decision tokens, not in group statistics)
    filter_reason: str = ""  # why it is not kept ("" when kept)
    n_calls: int = 0
    paths: tuple[int, ...] = ()  # indices into PrefixTree.paths
    parent: str = ""  # a branch: the rollout whose first `branch_call` calls it replayed
    branch_call: int = 0
    # served calls per class (store/call_classes.py: main, side, retry, compaction)
    call_classes: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class FlatTree:
    """Per-token arrays over the whole tree in DFS order (index q = ``tin[q]``).

    Packing rule: token q may attend key k iff ``k <= q < subtree_end[k]`` (k is q or an ancestor).
    The logits that score token q are read at ``parent_index[q]`` (-1: the first token of a root
    child, which is scored by nothing). ``positions`` are RoPE position ids within each
    root-to-leaf sequence (siblings repeat positions).
    """

    tokens: np.ndarray  # int32 [N]
    positions: np.ndarray  # int32 [N]
    parent_index: np.ndarray  # int64 [N], -1 for a first token
    subtree_end: np.ndarray  # int64 [N] (tout; tin is arange(N))
    decision: np.ndarray  # bool [N]
    engine_logprobs: np.ndarray  # float32 [N]
    temperature: np.ndarray  # float32 [N]
    policy_version: np.ndarray  # int32 [N]
    node_index: np.ndarray  # int32 [N]: node of each token
    node_offsets: np.ndarray  # int64 [n_nodes + 1]: node i spans node_offsets[i]:node_offsets[i+1]

    def __len__(self) -> int:
        return int(self.tokens.shape[0])


@dataclass
class PrefixTree:
    group_id: str
    task_id: str
    nodes: list[Node]
    paths: list[Path]
    rollouts: dict[str, RolloutInfo]
    stats: TreeStats

    @property
    def root(self) -> Node:
        return self.nodes[0]

    @property
    def n_tokens(self) -> int:
        return sum(len(n) for n in self.nodes)

    @property
    def harness(self) -> str:
        """The harness of the group's rollouts (a group runs one harness); "" for no rollouts."""
        return next((r.harness for r in self.rollouts.values()), "")

    def kept_rollouts(self) -> list[str]:
        """Ids of the rollouts that train (in the order of ``rollouts``)."""
        return [r.rollout_id for r in self.rollouts.values() if r.kept]

    def path_tokens(self, path: Path | int) -> np.ndarray:
        """The root-to-end token ids of a path."""
        p = self.paths[path] if isinstance(path, int) else path
        parts = [self.nodes[i].tokens for i in p.nodes]
        return np.concatenate(parts) if parts else np.zeros(0, np.int32)

    def paths_of(self, rollout_id: str) -> list[Path]:
        return [self.paths[i] for i in self.rollouts[rollout_id].paths]

    def leaves(self) -> list[Node]:
        return [n for n in self.nodes if not n.children and n.id != 0]

    @cached_property
    def _flat(self) -> FlatTree:
        return flatten(self.nodes)

    def flat(self) -> FlatTree:
        """Flat per-token arrays in DFS order (computed once)."""
        return self._flat

    def node_kept_rollouts(self) -> list[tuple[str, ...]]:
        """Per node, the kept rollouts that pass through it."""
        kept = {r for r, info in self.rollouts.items() if info.kept}
        return [tuple(r for r in n.rollouts if r in kept) for n in self.nodes]

    def token_rollout_count(self, kept_only: bool = True) -> np.ndarray:
        """int32 [N]: number of (kept) rollouts through each flat token."""
        per_node = self.node_kept_rollouts() if kept_only else [n.rollouts for n in self.nodes]
        counts = np.array([len(r) for r in per_node], dtype=np.int32)
        return counts[self.flat().node_index]

    def token_rollouts(self, q: int, kept_only: bool = True) -> tuple[str, ...]:
        """The (kept) rollouts through flat token q."""
        node = int(self.flat().node_index[q])
        return self.node_kept_rollouts()[node] if kept_only else self.nodes[node].rollouts


def flatten(nodes: list[Node]) -> FlatTree:
    """Concatenate node spans (DFS pre-order) into flat arrays with packing indices."""
    sizes = np.array([len(n) for n in nodes], dtype=np.int64)
    offsets = np.zeros(len(nodes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    total = int(offsets[-1])

    def cat(name: str, dtype: DTypeLike) -> np.ndarray:
        parts = [getattr(n, name) for n in nodes if len(n)]
        return np.concatenate(parts).astype(dtype, copy=False) if parts else np.zeros(0, dtype)

    node_index = np.repeat(np.arange(len(nodes), dtype=np.int32), sizes)
    local = np.arange(total, dtype=np.int64) - offsets[:-1][node_index]
    starts = np.array([n.start_pos for n in nodes], dtype=np.int64)
    positions = (starts[node_index] + local).astype(np.int32)

    # subtree end of each node: DFS pre-order makes every subtree a contiguous range
    sub_end = offsets[1:].copy()
    for n in reversed(nodes):
        if n.parent >= 0:
            sub_end[n.parent] = max(sub_end[n.parent], sub_end[n.id])

    parent_last = np.array(
        [offsets[n.parent + 1] - 1 if n.parent >= 0 and len(nodes[n.parent]) else _last_token(nodes, n, offsets)
         for n in nodes], dtype=np.int64)
    parent_index = np.arange(total, dtype=np.int64) - 1
    first = offsets[:-1][sizes > 0]
    parent_index[first] = parent_last[sizes > 0]
    return FlatTree(
        tokens=cat("tokens", np.int32), positions=positions, parent_index=parent_index,
        subtree_end=sub_end[node_index], decision=cat("decision", bool),
        engine_logprobs=cat("engine_logprobs", np.float32), temperature=cat("temperature", np.float32),
        policy_version=cat("policy_version", np.int32), node_index=node_index, node_offsets=offsets,
    )


def _last_token(nodes: list[Node], node: Node, offsets: np.ndarray) -> int:
    """Flat index of the last token above ``node`` (skipping empty spans), -1 if none."""
    p = node.parent
    while p >= 0 and len(nodes[p]) == 0:
        p = nodes[p].parent
    return int(offsets[p + 1] - 1) if p >= 0 else -1
