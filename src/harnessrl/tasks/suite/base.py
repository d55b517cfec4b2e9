"""Assembly of a built-in Task from a family's Job and a template, with the standalone checker as
its verifier."""

from __future__ import annotations

import json
from importlib import resources

from harnessrl.tasks.model import Task, Verifier, text_files
from harnessrl.tasks.suite.families import Family, Job


def checker_source() -> bytes:
    return resources.files("harnessrl.tasks.suite").joinpath("checker.py").read_bytes()


def assemble(family: Family, split: str, variant: int, template: str, job: Job, checker: bytes) -> Task:
    verifier = Verifier(
        kind="checks",
        command="python3 .verifier/verify.py",
        files={"verify.py": checker, "checks.json": json.dumps(job.checks, indent=1).encode()},
        dest=".verifier",
        timeout_s=30.0,
    )
    return Task(
        id=f"{family.name}-{split}-{variant:02d}",
        instruction=template.format(**job.slots),
        files=text_files(job.files),
        verifier=verifier,
        category=family.category,
        split=split,
        family=family.name,
        variant=variant,
        reference_solution=job.solution,
        metadata={**job.slots, **job.meta, "template": template, "trained_family": family.trained},
        source="builtin",
    )
