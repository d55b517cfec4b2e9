"""The built-in task suite, generated at load time from parametrised family generators.

Deterministic: variant v of family f in split s is generated from the seed "f:s:v", so the suite is
the same on every machine and every run. Selectors: builtin:train, builtin:test, builtin:all,
builtin:<category>, builtin:<category>:<split>, builtin:<family>.
"""

from __future__ import annotations

import random

from harnessrl.tasks.model import Task, TaskError
from harnessrl.tasks.suite.base import assemble, checker_source
from harnessrl.tasks.suite.families import FAMILIES

SPLIT_SIZES = {"train": 6, "test": 2}  # variants per family in each split
SPLITS = tuple(SPLIT_SIZES)


def build_suite(split_sizes: dict[str, int] | None = None) -> list[Task]:
    """Every built-in task, ordered by family, split, variant."""
    sizes = split_sizes or SPLIT_SIZES
    checker = checker_source()
    tasks = []
    for family in FAMILIES:
        for split, count in sizes.items():
            for variant in range(count):
                rng = random.Random(f"{family.name}:{split}:{variant}")
                tasks.append(assemble(family, split, variant, family.make(rng, split), checker))
    return tasks


def categories() -> list[str]:
    return sorted({f.category for f in FAMILIES})


def select_builtin(selector: str) -> list[Task]:
    """Tasks for `builtin:<what>[:<split>]` where what is all|train|test|a category|a family."""
    parts = selector.split(":")
    if parts[0] != "builtin" or len(parts) not in (2, 3):
        raise TaskError(f"bad selector {selector!r}; use builtin:train|test|all|<category>[:<split>]")
    what, split = parts[1], parts[2] if len(parts) == 3 else None
    tasks = build_suite()
    if what in SPLITS:
        split, what = what, "all"
    if split is not None and split not in SPLITS:
        raise TaskError(f"unknown split {split!r} in {selector!r}; splits: {', '.join(SPLITS)}")
    families = {f.name for f in FAMILIES}
    if what != "all" and what not in categories() and what not in families:
        raise TaskError(f"unknown category or family {what!r} in {selector!r}; categories: "
                        f"{', '.join(categories())}; families: {', '.join(sorted(families))}")
    return [t for t in tasks
            if (what == "all" or what in (t.category, t.family)) and (split is None or t.split == split)]
