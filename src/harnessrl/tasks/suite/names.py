"""File-name styles of the broad-wording sets (wide.py, lookup.py, jobs.py): the same pools of words
and stems (pools.py, paraphrase.py) written the ways people name files.

| style  | example          | shape                                        |
|--------|------------------|----------------------------------------------|
| plain  | `ledger.txt`     | stem.ext                                     |
| digit  | `amber3.note`    | word + digit . ext                           |
| title  | `Report_Q3.txt`  | Capitalised stem _ tag . ext                 |
| kebab  | `data-2.csv`     | stem - number . ext                          |
| snake  | `old_digest.log` | adjective _ stem . ext                       |

Every name is shell-safe (letters, digits, `._-`): a name never needs quoting, so a reference
command and the model's command look alike. `StyledPools` is a `Pools` whose `files` draws these
styles, so the suite's job makers (families.py) take them without a change.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Callable

from harnessrl.tasks.suite.pools import Pools

EXTS = ("txt", "note", "log", "md", "dat", "text")
_TAGS = ("Q1", "Q2", "Q3", "Q4", "v2", "v3", "final", "old", "2024", "draft")
_ADJECTIVES = ("old", "new", "spare", "my", "team", "daily", "weekly", "extra")


def _plain(rng: random.Random, stem: str, word: str) -> str:
    return stem


def _digit(rng: random.Random, stem: str, word: str) -> str:
    return f"{word}{rng.randint(1, 9)}"


def _title(rng: random.Random, stem: str, word: str) -> str:
    return f"{stem.capitalize()}_{rng.choice(_TAGS)}"


def _kebab(rng: random.Random, stem: str, word: str) -> str:
    return f"{stem}-{rng.randint(1, 12)}"


def _snake(rng: random.Random, stem: str, word: str) -> str:
    return f"{rng.choice(_ADJECTIVES)}_{stem}"


NAME_STYLES: dict[str, Callable[[random.Random, str, str], str]] = {
    "plain": _plain, "digit": _digit, "title": _title, "kebab": _kebab, "snake": _snake}


def styled_name(rng: random.Random, style: str, stem: str, word: str, ext: str) -> str:
    """One file name of `style` from a stem and a word of a pool, with extension `ext`."""
    return f"{NAME_STYLES[style](rng, stem, word)}.{ext}"


@dataclass(frozen=True)
class StyledPools(Pools):
    """A split's pools, with file names drawn in every style of NAME_STYLES (one per name, at
    random) and the extensions of EXTS. Names of one draw are distinct, and so are their stems and
    words, so two names never differ only by style."""

    name_exts: tuple[str, ...] = EXTS

    def files(self, rng: random.Random, k: int, exts: tuple[str | None, ...] = ()) -> list[str]:
        stems, words = rng.sample(self.stems, k), rng.sample(self.words, k)
        out = []
        for i in range(k):
            given = exts[i] if i < len(exts) else None
            ext = given or rng.choice(self.name_exts)
            out.append(styled_name(rng, rng.choice(sorted(NAME_STYLES)), stems[i], words[i], ext))
        return out


def styled(pools: Pools) -> StyledPools:
    """`pools` (same words, stems, dirs) with styled file names."""
    return StyledPools(pools.name, pools.words, pools.stems, pools.dirs, pools.exts)
