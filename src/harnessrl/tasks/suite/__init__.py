"""The built-in task suite, generated at load time from family jobs (families.py) and wordings.

Four splits, each generated from the seed "<family>:<split>:<variant>" (same suite on every
machine and run):

| split      | families          | wording                               | names and values        |
|------------|-------------------|---------------------------------------|-------------------------|
| train      | trained families  | training templates (templates.py)     | train pools (pools.py)  |
| test       | trained families  | training templates                    | test pools (disjoint)   |
| paraphrase | trained families  | paraphrases (paraphrase.py)           | paraphrase pools        |
| unseen     | held-out families | their own templates                   | test pools              |

`test` measures new instances of the trained jobs, `paraphrase` the same jobs worded in new ways
with new names and values, `unseen` families that training never shows.

Selectors: builtin:<what>[:<split>] where what is all, a split, a category or a family.
The multi-step sets (chained tasks, office-style families; suite/sets.py) have their own selectors,
builtin:chain[:<split>] and builtin:office[:<split>], and are not part of builtin:all; so are the
broad-wording sets (broad.py: a wording generator with disjoint style groups), builtin:wide,
builtin:lookup (read-then-act) and builtin:jobs (k file jobs), each [:<split>].
"""

from __future__ import annotations

import random

from harnessrl.tasks.model import Task, TaskError
from harnessrl.tasks.suite.base import assemble, checker_source
from harnessrl.tasks.suite.families import FAMILIES, Family
from harnessrl.tasks.suite.paraphrase import PARAPHRASE_POOLS, PARAPHRASES
from harnessrl.tasks.suite.pools import TEST, TRAIN, Pools
from harnessrl.tasks.suite.templates import TRAINING, UNSEEN

SPLIT_SIZES = {"train": 32, "test": 8, "paraphrase": 8, "unseen": 6}  # variants per family
SPLITS = tuple(SPLIT_SIZES)
TRAINED_SPLITS = ("train", "test", "paraphrase")


def split_wording(family: Family, split: str) -> tuple[tuple[str, ...], Pools]:
    """The templates and pools a family uses in a split."""
    if not family.trained:
        return UNSEEN[family.name], TEST
    if split == "paraphrase":
        return PARAPHRASES[family.name], PARAPHRASE_POOLS
    return TRAINING[family.name], TRAIN if split == "train" else TEST


def family_splits(family: Family) -> tuple[str, ...]:
    return TRAINED_SPLITS if family.trained else ("unseen",)


def build_suite(split_sizes: dict[str, int] | None = None) -> list[Task]:
    """Every built-in task, ordered by family, split, variant."""
    sizes = split_sizes or SPLIT_SIZES
    checker = checker_source()
    tasks = []
    for family in FAMILIES:
        for split in family_splits(family):
            templates, pools = split_wording(family, split)
            for variant in range(sizes.get(split, 0)):
                rng = random.Random(f"{family.name}:{split}:{variant}")
                job = family.make(rng, pools)
                template = templates[variant % len(templates)]
                tasks.append(assemble(family, split, variant, template, job, checker))
    return tasks


def categories() -> list[str]:
    return sorted({f.category for f in FAMILIES})


def trained_families() -> list[str]:
    return [f.name for f in FAMILIES if f.trained]


def unseen_families() -> list[str]:
    return [f.name for f in FAMILIES if not f.trained]


def select_builtin(selector: str) -> list[Task]:
    """Tasks for `builtin:<what>[:<split>]` where what is all|a split|a category|a family."""
    from harnessrl.tasks.suite.sets import is_multistep, select_multistep

    parts = selector.split(":")
    if len(parts) > 1 and parts[0] == "builtin" and is_multistep(parts[1]):
        return select_multistep(selector)
    if parts[0] != "builtin" or len(parts) not in (2, 3):
        raise TaskError(f"bad selector {selector!r}; use builtin:<all|{'|'.join(SPLITS)}|category|family>[:<split>]")
    what, split = parts[1], parts[2] if len(parts) == 3 else None
    if what in SPLITS:
        if split is not None:
            raise TaskError(f"bad selector {selector!r}: {what!r} is already a split")
        split, what = what, "all"
    if split is not None and split not in SPLITS:
        raise TaskError(f"unknown split {split!r} in {selector!r}; splits: {', '.join(SPLITS)}")
    families = {f.name for f in FAMILIES}
    if what != "all" and what not in categories() and what not in families:
        raise TaskError(f"unknown category or family {what!r} in {selector!r}; categories: "
                        f"{', '.join(categories())}; families: {', '.join(sorted(families))}")
    tasks = [t for t in build_suite()
             if (what == "all" or what in (t.category, t.family)) and (split is None or t.split == split)]
    if not tasks:
        hint = (f"; {what} is never trained on: its tasks are in builtin:{what}:unseen" if what in unseen_families()
                else f"; {what} is a trained family: splits {', '.join(TRAINED_SPLITS)}" if what in families else "")
        raise TaskError(f"no built-in tasks match {selector!r}{hint}")
    return tasks
