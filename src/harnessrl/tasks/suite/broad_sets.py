"""The selector of the broad-wording sets (broad.py): builtin:<wide|lookup|jobs>[:<split>]."""

from __future__ import annotations

from harnessrl.tasks.model import Task, TaskError
from harnessrl.tasks.suite.jobs import JOBS_SPLITS, build_jobs
from harnessrl.tasks.suite.lookup import LOOKUP_SPLITS, build_lookup
from harnessrl.tasks.suite.wide import WIDE_SPLITS, build_wide

BROAD_SETS = ("wide", "lookup", "jobs")


def select_broad(selector: str) -> list[Task]:
    """Tasks for builtin:<wide|lookup|jobs>[:<split>]."""
    parts = selector.split(":")
    table = {"wide": (WIDE_SPLITS, build_wide), "lookup": (LOOKUP_SPLITS, build_lookup), "jobs": (JOBS_SPLITS, build_jobs)}
    if len(parts) not in (2, 3) or parts[1] not in table:
        raise TaskError(f"bad selector {selector!r}; use builtin:<{'|'.join(BROAD_SETS)}>[:<split>]")
    splits, build = table[parts[1]]
    if len(parts) == 3 and parts[2] not in splits:
        raise TaskError(f"unknown {parts[1]} split {parts[2]!r} in {selector!r}; splits: {', '.join(splits)}")
    return build((parts[2],) if len(parts) == 3 else tuple(splits))
