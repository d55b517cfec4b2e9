"""Branched groups for the tree-credit tests (pure numpy): fresh multi-turn rollouts and branches
that replay a parent's first j calls (proxy/replay.py marks them) and sample fresh from call j."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from harnessrl.store.records import Lineage
from harnessrl.tree import build_tree
from harnessrl.tree.filters import FilterConfig
from tests.support.synthetic import conversation_calls, make_rollout

S = [10, 11]


def observe(completion: list[int]) -> list[int]:
    """The tool result of a completion (deterministic, as a re-executed harness reproduces it)."""
    return [50 + sum(completion) % 7]


def rollout_calls(rid: str, completions: list[list[int]], replayed_from: str = "", replay: int = 0):
    calls = conversation_calls(rid, S, [(c, observe(c)) for c in completions])
    return [replace(c, meta={"replay": {"of": f"{replayed_from}:{k}", "match": "exact"}}) if k < replay else c
            for k, c in enumerate(calls)]


def random_branched_group(seed: int, borrowed: bool = False):
    """(calls, rollouts): 2-4 fresh rollouts of 1-3 calls over a small vocabulary (shared samples
    happen), then 0-3 branch points of width 1-3 on fresh parents with >= 2 calls; rewards in
    {0, 1, 2}; `borrowed`: one more point whose parent is not in the group."""
    rng = np.random.default_rng(seed)
    calls, rollouts, own = [], [], {}

    def completions(n: int) -> list[list[int]]:
        return [rng.integers(1, 4, int(rng.integers(1, 3))).tolist() for _ in range(n)]

    for i in range(int(rng.integers(2, 5))):
        rid = f"f{i}"
        own[rid] = completions(int(rng.integers(1, 4)))
        calls += rollout_calls(rid, own[rid])
        rollouts.append(make_rollout(rid, float(rng.integers(0, 3))))
    parents = [r for r, c in own.items() if len(c) >= 2]
    if borrowed:
        own["old"] = completions(3)
        parents.append("old")
    n_points = max(int(rng.integers(0, 4)), int(borrowed)) if parents else 0
    for k in range(n_points):
        p = parents[int(rng.integers(0, len(parents)))] if not borrowed or k else "old"
        j = int(rng.integers(1, len(own[p])))
        for b in range(int(rng.integers(1, 4))):
            rid = f"b{k}.{b}"
            calls += rollout_calls(rid, own[p][:j] + completions(int(rng.integers(1, 3))), p, j)
            rollouts.append(replace(make_rollout(rid, float(rng.integers(0, 3))),
                                    lineage=Lineage(p, j, replayed=j, exact=j)))
    return calls, rollouts


def tree_of(calls, rollouts):
    return build_tree(calls, rollouts, FilterConfig(side_calls="train"))
