"""Shared pieces of the built-in suite's family generators: name pools, phrasing choice, and the
assembly of a Task with the standalone checker as its verifier.

Train and held-out test variants draw from DISJOINT pools of words, file names and phrasings, so
the test split measures generalisation to new surface forms rather than memory of train tasks.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from importlib import resources
from typing import Any, Callable

from harnessrl.tasks.model import Task, Verifier, text_files

WORDS = {
    "train": ["apple", "river", "candle", "orbit", "maple", "pepper", "violet", "harbor", "tiger",
              "falcon", "copper", "meadow", "lemon", "glacier", "walnut", "comet"],
    "test": ["banana", "forest", "anchor", "silver", "planet", "tulip", "rocket", "ginger", "marble",
             "island", "cobalt", "saddle"],
}
STEMS = {
    "train": ["notes", "report", "draft", "memo", "log", "summary", "todo", "letter", "data", "catalog"],
    "test": ["journal", "record", "sheet", "ledger", "brief", "digest", "paper", "entry"],
}
DIRS = {
    "train": ["archive", "docs", "build", "work", "backup", "stuff"],
    "test": ["vault", "inbox", "shelf", "crate"],
}


@dataclass(frozen=True)
class Draft:
    """What a family generator returns for one variant."""

    instruction: str
    files: dict[str, str]
    checks: list[dict[str, Any]]  # {"name", "kind", ...} as read by checker.py
    solution: tuple[str, ...]
    meta: dict[str, Any]


@dataclass(frozen=True)
class Family:
    name: str
    category: str
    make: Callable[[random.Random, str], Draft]  # (rng, split) -> Draft


def pick_phrasing(rng: random.Random, phrasings: list[str], split: str) -> str:
    """The last phrasing is reserved for the test split; train draws from the others."""
    return phrasings[-1] if split == "test" else rng.choice(phrasings[:-1])


def pick(rng: random.Random, pool: dict[str, list[str]], split: str, k: int = 1) -> list[str]:
    return rng.sample(pool[split], k)


def fname(rng: random.Random, split: str, ext: str = "txt") -> str:
    return f"{pick(rng, STEMS, split)[0]}.{ext}"


def checker_source() -> bytes:
    return resources.files("harnessrl.tasks.suite").joinpath("checker.py").read_bytes()


def assemble(family: Family, split: str, variant: int, draft: Draft, checker: bytes) -> Task:
    verifier = Verifier(
        kind="checks",
        command="python3 .verifier/verify.py",
        files={"verify.py": checker, "checks.json": json.dumps(draft.checks, indent=1).encode()},
        dest=".verifier",
        timeout_s=30.0,
    )
    return Task(
        id=f"{family.name}-{split}-{variant:02d}",
        instruction=draft.instruction,
        files=text_files(draft.files),
        verifier=verifier,
        category=family.category,
        split=split,
        family=family.name,
        variant=variant,
        reference_solution=draft.solution,
        metadata=draft.meta,
        source="builtin",
    )
