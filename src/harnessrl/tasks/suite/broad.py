"""The broad-wording sets and their selectors: every job worded by the generator (wording.py), file
names in five styles (names.py).

    builtin:wide[:<split>]     the seven trained file jobs of the suite (wide.py), one job a task
    builtin:lookup[:<split>]   read-then-act (lookup.py): a note names what to do; k calls
    builtin:jobs[:<split>]     k file jobs in one request (jobs.py)

| split      | wording group (styles)     | names and values  | k: lookup | k: jobs |
|------------|----------------------------|-------------------|-----------|---------|
| `train`    | train (plain, request)     | TRAIN pools       | 2         | 2       |
| `test`     | train                      | TEST pools        | 2         | 2       |
| `long`     | train                      | TEST pools        | 3         | 3, 4    |
| `reworded` | reworded                   | paraphrase pools  | 2         | 2       |
| `style`    | style (ticket)             | TEST pools        | 2         | 2       |

(`wide` has no `long`.) `test` and `style` differ only in wording, so their rows side by side
show what a wording style training never produces costs. Variant v of set s in split p comes from
the seed "<s>:<p>:<v>" (wide: "wide:<family>:<p>:<v>"). None of these is part of `builtin:all`.
"""

from __future__ import annotations

from dataclasses import dataclass

from harnessrl.tasks.model import Task, TaskError
from harnessrl.tasks.suite.names import StyledPools, styled
from harnessrl.tasks.suite.paraphrase import PARAPHRASE_POOLS
from harnessrl.tasks.suite.pools import TEST, TRAIN


@dataclass(frozen=True)
class BroadSplit:
    group: str  # the wording group (wording.py STYLE_GROUPS)
    pools: StyledPools
    lengths: tuple[int, ...]  # k, cycled through the variants
    size: int  # tasks (lookup, jobs) or tasks per family (wide)


def broad_splits(train: int, held_out: int, k: int, long: tuple[int, ...]) -> dict[str, BroadSplit]:
    """The split table of one set: `train` tasks at k, `held_out` in each held-out split."""
    splits = {
        "train": BroadSplit("train", styled(TRAIN), (k,), train),
        "test": BroadSplit("train", styled(TEST), (k,), held_out),
        "long": BroadSplit("train", styled(TEST), long, held_out),
        "reworded": BroadSplit("reworded", styled(PARAPHRASE_POOLS), (k,), held_out),
        "style": BroadSplit("style", styled(TEST), (k,), held_out),
    }
    return splits if long else {name: s for name, s in splits.items() if name != "long"}


BROAD_SETS = ("wide", "lookup", "jobs")


def select_broad(selector: str) -> list[Task]:
    """Tasks for builtin:<wide|lookup|jobs>[:<split>]."""
    from harnessrl.tasks.suite.jobs import JOBS_SPLITS, build_jobs
    from harnessrl.tasks.suite.lookup import LOOKUP_SPLITS, build_lookup
    from harnessrl.tasks.suite.wide import WIDE_SPLITS, build_wide

    parts = selector.split(":")
    table = {"wide": (WIDE_SPLITS, build_wide), "lookup": (LOOKUP_SPLITS, build_lookup), "jobs": (JOBS_SPLITS, build_jobs)}
    if len(parts) not in (2, 3) or parts[1] not in table:
        raise TaskError(f"bad selector {selector!r}; use builtin:<{'|'.join(BROAD_SETS)}>[:<split>]")
    splits, build = table[parts[1]]
    if len(parts) == 3 and parts[2] not in splits:
        raise TaskError(f"unknown {parts[1]} split {parts[2]!r} in {selector!r}; splits: {', '.join(splits)}")
    return build((parts[2],) if len(parts) == 3 else tuple(splits))
