"""A task stand-in for the sampler and group tests: an id, a family, and the builtin pass rule
(reward >= 1.0); category and split as the loop reads them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PassTask:
    id: str
    family: str = "fam"
    category: str = ""
    split: str = "train"

    def passed(self, reward: float | None) -> bool:
        return reward is not None and reward >= 1.0
