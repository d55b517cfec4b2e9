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
the seed "<s>:<p>:<v>" (wide: "wide:<family>:<p>:<v>"). None of these is part of `builtin:all`;
broad_sets.py selects them.
"""

from __future__ import annotations

from dataclasses import dataclass

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
