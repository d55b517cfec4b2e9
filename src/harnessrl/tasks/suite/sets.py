"""The multi-step task sets and their selectors (kept out of `builtin:all`, whose 402 one-job tasks
never change):

    builtin:chain[:<split>]            chained tasks (chains.py): train, test, long, unseen, paraphrase
    builtin:office[:<split>]           office families (office.py): train, test, paraphrase, unseen
    builtin:<office family>[:<split>]  one office family, e.g. builtin:region_report:test
    builtin:<wide|lookup|jobs>[:<split>]  the broad-wording sets (broad.py, broad_sets.py)

Office splits follow the suite: trained families in train (TRAIN pools, training templates), test
(TEST pools, training templates) and paraphrase (paraphrase pools and wordings); the never-trained
families only in unseen (TEST pools, their own templates). Variant v of family f in split s comes
from the seed "<f>:<s>:<v>".
"""

from __future__ import annotations

import random

from harnessrl.tasks.model import Task, TaskError, text_files
from harnessrl.tasks.suite.chains import CHAIN_SPLITS, build_chains
from harnessrl.tasks.suite.multistep import max_turns_for, step_checker_source, step_verifier
from harnessrl.tasks.suite.office import OFFICE_FAMILIES, OfficeFamily
from harnessrl.tasks.suite.office_words import OFFICE_PARAPHRASES, OFFICE_TRAINING, OFFICE_UNSEEN
from harnessrl.tasks.suite.paraphrase import PARAPHRASE_POOLS
from harnessrl.tasks.suite.pools import TEST, TRAIN, Pools

OFFICE_SPLIT_SIZES = {"train": 16, "test": 8, "paraphrase": 8, "unseen": 8}  # variants per family


def _wording(family: OfficeFamily, split: str) -> tuple[tuple[str, ...], Pools]:
    if not family.trained:
        return OFFICE_UNSEEN[family.name], TEST
    if split == "paraphrase":
        return OFFICE_PARAPHRASES[family.name], PARAPHRASE_POOLS
    return OFFICE_TRAINING[family.name], TRAIN if split == "train" else TEST


def office_splits(family: OfficeFamily) -> tuple[str, ...]:
    return ("train", "test", "paraphrase") if family.trained else ("unseen",)


def make_office(family: OfficeFamily, split: str, variant: int, checker: bytes) -> Task:
    templates, pools = _wording(family, split)
    job = family.make(random.Random(f"{family.name}:{split}:{variant}"), pools, split)
    template = templates[variant % len(templates)]
    meta = {**job.slots, **job.meta, "template": template, "trained_family": family.trained,
            "steps": family.steps, "max_turns": max_turns_for(family.steps)}
    return Task(id=f"{family.name}-{split}-{variant:02d}", instruction=template.format(**job.slots),
                files=text_files(job.files), verifier=step_verifier(job.checks, checker),
                category=family.category, split=split, family=family.name, variant=variant,
                reference_solution=job.solution, metadata=meta, source="builtin")


def build_office(families: tuple[str, ...] = (), splits: tuple[str, ...] = ()) -> list[Task]:
    """Office tasks (all families and splits by default), ordered by family, split, variant."""
    checker = step_checker_source()
    return [make_office(f, s, v, checker) for f in OFFICE_FAMILIES if not families or f.name in families
            for s in office_splits(f) if not splits or s in splits for v in range(OFFICE_SPLIT_SIZES[s])]


def is_multistep(what: str) -> bool:
    """Whether `builtin:<what>...` names a multi-step set rather than a part of the one-job suite."""
    from harnessrl.tasks.suite.broad_sets import BROAD_SETS

    return what in ("chain", "office", *BROAD_SETS) or what in {f.name for f in OFFICE_FAMILIES}


def select_multistep(selector: str) -> list[Task]:
    from harnessrl.tasks.suite.broad_sets import BROAD_SETS, select_broad

    parts = selector.split(":")
    if parts[1] in BROAD_SETS:
        return select_broad(selector)
    if len(parts) not in (2, 3):
        raise TaskError(f"bad selector {selector!r}; use builtin:chain[:<split>] or builtin:office[:<split>]")
    what, split = parts[1], parts[2] if len(parts) == 3 else None
    if what == "chain":
        if split is not None and split not in CHAIN_SPLITS:
            raise TaskError(f"unknown chain split {split!r} in {selector!r}; splits: {', '.join(CHAIN_SPLITS)}")
        return build_chains((split,) if split else tuple(CHAIN_SPLITS))
    if split is not None and split not in OFFICE_SPLIT_SIZES:
        raise TaskError(f"unknown office split {split!r} in {selector!r}; splits: {', '.join(OFFICE_SPLIT_SIZES)}")
    tasks = build_office(() if what == "office" else (what,), (split,) if split else ())
    if not tasks:
        family = next(f for f in OFFICE_FAMILIES if f.name == what)
        raise TaskError(f"no office tasks match {selector!r}; {what} has the splits {', '.join(office_splits(family))}")
    return tasks
