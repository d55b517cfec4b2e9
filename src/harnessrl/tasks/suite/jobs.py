"""`builtin:jobs[:<split>]`: k file jobs in one request (k = 2 trained, 3 and 4 in `long`), each a
job of a trained suite family (families.py: write_word, touch_file, delete_file, rename_file,
copy_file, overwrite; no two alike in a task) on files of its own, worded together by the generator
(wording.py: one join, one core per job). Each job keeps its family's checks, named "job i: ...";
the task passes when every check does. The reference solution is one command per job, in order.
"""

from __future__ import annotations

import json
import random
from typing import Any

from harnessrl.tasks.model import Task, Verifier, text_files
from harnessrl.tasks.suite.base import checker_source
from harnessrl.tasks.suite.broad import BroadSplit, broad_splits
from harnessrl.tasks.suite.families import FAMILIES, Job
from harnessrl.tasks.suite.names import StyledPools
from harnessrl.tasks.suite.wording import word_jobs

JOBS_SPLITS: dict[str, BroadSplit] = broad_splits(train=48, held_out=16, k=2, long=(3, 4))
JOB_FAMILIES = ("write_word", "touch_file", "delete_file", "rename_file", "copy_file", "overwrite")
_SLOT_FILES = ("name", "src", "dst", "out")


def _paths(job: Job) -> set[str]:
    return set(job.files) | {v for key, v in job.slots.items() if key in _SLOT_FILES}


def pick_jobs(rng: random.Random, p: StyledPools, k: int) -> list[tuple[str, Job]]:
    """k jobs of distinct families whose files are disjoint (a job is drawn again on a clash)."""
    makers = {f.name: f.make for f in FAMILIES}
    out: list[tuple[str, Job]] = []
    used: set[str] = set()
    for name in rng.sample(JOB_FAMILIES, k):
        for _ in range(100):
            job = makers[name](rng, p)
            if not _paths(job) & used:
                break
        else:
            raise RuntimeError(f"no {name} job with new file names after 100 draws")
        used |= _paths(job)
        out.append((name, job))
    return out


def make_jobs(split: str, variant: int, checker: bytes) -> Task:
    spec = JOBS_SPLITS[split]
    k = spec.lengths[variant % len(spec.lengths)]
    rng = random.Random(f"jobs:{split}:{variant}")
    jobs = pick_jobs(rng, spec.pools, k)
    wording = word_jobs(rng, spec.group, [(name, job.slots) for name, job in jobs])
    checks: list[dict[str, Any]] = [{**c, "name": f"job {i + 1}: {c['name']}"}
                                    for i, (_, job) in enumerate(jobs) for c in job.checks]
    files = {path: text for _, job in jobs for path, text in job.files.items()}
    verifier = Verifier(kind="checks", command="python3 .verifier/verify.py", dest=".verifier", timeout_s=30.0,
                        files={"verify.py": checker, "checks.json": json.dumps(checks, indent=1).encode()})
    meta = {"k": k, "max_turns": k + 2, "jobs": [name for name, _ in jobs], "wording_group": wording.group,
            "style": wording.style, "shape": wording.shape, "cores": list(wording.cores), "trained_family": True}
    return Task(id=f"jobs-{split}-{variant:02d}", instruction=wording.text, files=text_files(files), verifier=verifier,
                category="jobs", split=split, family="jobs", variant=variant,
                reference_solution=tuple(c for _, job in jobs for c in job.solution), metadata=meta, source="builtin")


def build_jobs(splits: tuple[str, ...] = tuple(JOBS_SPLITS)) -> list[Task]:
    """The jobs tasks of these splits, ordered by split, then variant (k cycles within a split)."""
    checker = checker_source()
    return [make_jobs(s, v, checker) for s in splits for v in range(JOBS_SPLITS[s].size)]
