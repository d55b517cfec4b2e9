"""`builtin:wide[:<split>]`: the suite's seven trained file jobs (families.py: the same starting
files, checks and reference solutions) worded by the generator (wording.py) instead of the
hand-written templates, with styled file names (names.py). Splits: broad.py."""

from __future__ import annotations

import json
import random

from harnessrl.tasks.model import Task, Verifier, text_files
from harnessrl.tasks.suite.base import checker_source
from harnessrl.tasks.suite.broad import BroadSplit, broad_splits
from harnessrl.tasks.suite.families import FAMILIES, Family
from harnessrl.tasks.suite.wording import word_job

WIDE_SPLITS: dict[str, BroadSplit] = broad_splits(train=32, held_out=8, k=1, long=())
WIDE_FAMILIES = tuple(f for f in FAMILIES if f.trained)


def make_wide(family: Family, split: str, variant: int, checker: bytes) -> Task:
    spec = WIDE_SPLITS[split]
    rng = random.Random(f"wide:{family.name}:{split}:{variant}")
    job = family.make(rng, spec.pools)
    wording = word_job(rng, spec.group, family.name, job.slots)
    verifier = Verifier(kind="checks", command="python3 .verifier/verify.py", dest=".verifier", timeout_s=30.0,
                        files={"verify.py": checker, "checks.json": json.dumps(job.checks, indent=1).encode()})
    meta = {**job.slots, **job.meta, "k": 1, "wording_group": wording.group, "style": wording.style,
            "shape": wording.shape, "cores": list(wording.cores), "trained_family": True}
    return Task(id=f"wide-{family.name}-{split}-{variant:02d}", instruction=wording.text, files=text_files(job.files),
                verifier=verifier, category=family.category, split=split, family=family.name, variant=variant,
                reference_solution=job.solution, metadata=meta, source="builtin")


def build_wide(splits: tuple[str, ...] = tuple(WIDE_SPLITS)) -> list[Task]:
    """The wide tasks of these splits, ordered by split, family, variant."""
    checker = checker_source()
    return [make_wide(f, s, v, checker) for s in splits for f in WIDE_FAMILIES for v in range(WIDE_SPLITS[s].size)]
