"""Which tasks and harnesses a step runs: deterministic in (seed, step), so a resumed step replays
the same plan. Each group is one task run n times by one harness; harnesses share the groups of a
step in proportion to their weights (largest remainder), so a batch mixes them."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Sequence


@dataclass(frozen=True)
class GroupPlan:
    group_id: str
    task: Any  # harnessrl.tasks.model.Task
    harness: str
    n: int
    split: str
    step: int


def harness_counts(weights: dict[str, float], n_groups: int) -> dict[str, int]:
    """Groups per harness proportional to weight; remainders go to the largest fractions."""
    total = sum(weights.values())
    exact = {h: n_groups * w / total for h, w in weights.items()}
    counts = {h: int(x) for h, x in exact.items()}
    left = n_groups - sum(counts.values())
    for h in sorted(exact, key=lambda h: (exact[h] - counts[h], h), reverse=True)[:left]:
        counts[h] += 1
    return counts


def plan_step(step: int, attempt: int, tasks: Sequence[Any], weights: dict[str, float], n_groups: int,
              n_per_group: int, seed: int) -> list[GroupPlan]:
    """The groups of a training step (same tasks and harnesses for every attempt of the step)."""
    if not tasks:
        raise ValueError("no training tasks to plan from")
    rng = random.Random(seed * 1_000_003 + step)
    per_harness = harness_counts(weights, n_groups)
    harnesses = [h for h, c in per_harness.items() for _ in range(c)]
    rng.shuffle(harnesses)
    order = list(range(len(tasks)))
    rng.shuffle(order)
    picks = [tasks[order[i % len(order)]] for i in range(n_groups)]
    return [GroupPlan(f"s{step}-a{attempt}-g{i}", t, h, n_per_group, "train", step)
            for i, (t, h) in enumerate(zip(picks, harnesses))]


def plan_eval(step: int, attempt: int, tasks: Sequence[Any], harnesses: Sequence[str], size: int,
              samples: int = 1) -> list[GroupPlan]:
    """Held-out pass@1: the first `size` eval tasks (a fixed set), `samples` times per harness."""
    chosen = list(tasks)[:size]
    return [GroupPlan(f"eval-s{step}-a{attempt}-{h}-{i}", t, h, samples, "eval", step)
            for h in harnesses for i, t in enumerate(chosen)]
