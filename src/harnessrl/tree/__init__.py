"""Prefix tree of a group's recorded calls (pure Python + numpy; no torch/vllm/transformers).

    from harnessrl.tree import build_tree, FilterConfig
    tree = build_tree(calls, rollouts, FilterConfig())
    flat = tree.flat()   # per-token arrays in DFS order for tree-packed training
"""

from harnessrl.tree.build import build_tree
from harnessrl.tree.filters import ABNORMAL_STATUSES, FilterConfig
from harnessrl.tree.nodes import FlatTree, Node, Path, PrefixTree, RolloutInfo
from harnessrl.tree.stats import TreeStats, sum_stats

__all__ = [
    "ABNORMAL_STATUSES", "FilterConfig", "FlatTree", "Node", "Path", "PrefixTree", "RolloutInfo",
    "TreeStats", "build_tree", "sum_stats",
]
