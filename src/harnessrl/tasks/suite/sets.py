"""Selectors of the multi-step task sets (kept out of `builtin:all`, whose 402 tasks never change):

    builtin:chain[:<split>]          chained tasks (chains.py): train, test, long, unseen, paraphrase
    builtin:office[:<split>]         office-style families (office.py): train, test, paraphrase, unseen
    builtin:<office family>[:<split>]
"""

from __future__ import annotations

from harnessrl.tasks.model import Task, TaskError
from harnessrl.tasks.suite.chains import CHAIN_SPLITS, build_chains


def is_multistep(what: str) -> bool:
    """Whether `builtin:<what>...` names a multi-step set rather than a part of the one-job suite."""
    return what == "chain"


def select_multistep(selector: str) -> list[Task]:
    parts = selector.split(":")
    if len(parts) not in (2, 3):
        raise TaskError(f"bad selector {selector!r}; use builtin:chain[:<split>]")
    what, split = parts[1], parts[2] if len(parts) == 3 else None
    if what == "chain":
        if split is not None and split not in CHAIN_SPLITS:
            raise TaskError(f"unknown chain split {split!r} in {selector!r}; splits: {', '.join(CHAIN_SPLITS)}")
        return build_chains((split,) if split else tuple(CHAIN_SPLITS))
    raise TaskError(f"unknown multi-step set {what!r} in {selector!r}")
