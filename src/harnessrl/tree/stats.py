"""Per-tree statistics, summable over a run (``a + b``, ``sum_stats``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class TreeStats:
    """Token counts and branch/filter counters of one tree (or a sum of trees).

    - ``unique_tokens``: tokens in the tree (each shared token once): what tree training computes.
    - ``decision_tokens``: tree tokens sampled by the policy in a kept call (the loss tokens).
    - ``per_call_tokens``: sum of len(prompt + completion) over the inserted calls of kept rollouts
      (what training every call as its own sequence would compute).
    - ``per_rollout_tokens``: sum of path lengths over kept rollouts (each rollout's calls merged
      into one sequence where one extends the other, a new sequence where history was rewritten).
    - ``branches`` / ``branch_reasons``: branch points and why (see ``tree.build``).
    - ``merged_duplicates``: exact duplicate calls (same rollout, same prompt and completion).
    - ``filtered``: counters per filter (see ``tree.filters.FilterConfig``).
    """

    trees: int = 0
    rollouts: int = 0
    kept_rollouts: int = 0
    calls: int = 0
    nodes: int = 0
    paths: int = 0
    unique_tokens: int = 0
    decision_tokens: int = 0
    per_call_tokens: int = 0
    per_rollout_tokens: int = 0
    branches: int = 0
    branch_reasons: dict[str, int] = field(default_factory=dict)
    merged_duplicates: int = 0
    filtered: dict[str, int] = field(default_factory=dict)

    def __add__(self, other: TreeStats) -> TreeStats:
        out = TreeStats()
        for name in ("trees", "rollouts", "kept_rollouts", "calls", "nodes", "paths", "unique_tokens",
                     "decision_tokens", "per_call_tokens", "per_rollout_tokens", "branches",
                     "merged_duplicates"):
            setattr(out, name, getattr(self, name) + getattr(other, name))
        out.branch_reasons = dict(Counter(self.branch_reasons) + Counter(other.branch_reasons))
        out.filtered = dict(Counter(self.filtered) + Counter(other.filtered))
        return out

    @property
    def call_sharing(self) -> float:
        """per_call_tokens / unique_tokens (how much tree packing saves over one row per call)."""
        return self.per_call_tokens / self.unique_tokens if self.unique_tokens else 0.0

    @property
    def rollout_sharing(self) -> float:
        """per_rollout_tokens / unique_tokens (saving over one row per rollout path)."""
        return self.per_rollout_tokens / self.unique_tokens if self.unique_tokens else 0.0

    @property
    def merge_rate(self) -> float:
        """Fraction of per-call tokens that the tree merges away: 1 - unique / per_call."""
        return 1.0 - self.unique_tokens / self.per_call_tokens if self.per_call_tokens else 0.0

    def to_dict(self) -> dict[str, Any]:
        keys = ("trees", "rollouts", "kept_rollouts", "calls", "nodes", "paths", "unique_tokens",
                "decision_tokens", "per_call_tokens", "per_rollout_tokens", "branches",
                "merged_duplicates")
        out: dict[str, Any] = {k: getattr(self, k) for k in keys}
        out["branch_reasons"] = dict(sorted(self.branch_reasons.items()))
        out["filtered"] = dict(sorted(self.filtered.items()))
        out["call_sharing"] = round(self.call_sharing, 4)
        out["rollout_sharing"] = round(self.rollout_sharing, 4)
        out["merge_rate"] = round(self.merge_rate, 4)
        return out


def sum_stats(stats: Iterable[TreeStats]) -> TreeStats:
    total = TreeStats()
    for s in stats:
        total = total + s
    return total
