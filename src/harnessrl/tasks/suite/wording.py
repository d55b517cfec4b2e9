"""The wording generator of the broad-wording sets (wide.py, lookup.py, jobs.py): a job's slots in,
an instruction out, deterministic from the caller's seeded rng.

A one-job instruction is a *frame* (politeness, context: "Could you {core}?") around a *core* (the
job, in one of several orders: "delete {name}", "{name} has to go"); a several-job instruction is a
*join* ("First, {c}. Then {c}.", a numbered list, a ticket list) of cores. The tables are in
style_words.py, one per style. Styles come in groups, and the groups share no frame, join or core:

| group      | styles           | used by                                                       |
|------------|------------------|---------------------------------------------------------------|
| `train`    | plain, request   | the train split and the `test` split (new names and values)   |
| `reworded` | reworded         | the `reworded` split: new wording for every trained job       |
| `style`    | ticket           | the `style` split: a wording style training never produces    |

`producible(group, kinds, text)` says whether a group's generator can produce `text` (a regular
expression over its shapes): the tests check that no training instruction is producible by the
`reworded` or `style` generators.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache

from harnessrl.tasks.suite.style_words import CORES, FRAMES, JOINS

STYLE_GROUPS: dict[str, tuple[str, ...]] = {"train": ("plain", "request"), "reworded": ("reworded",),
                                            "style": ("ticket",)}
_SLOT = re.compile(r"\{(\w+)\}")


@dataclass(frozen=True)
class Wording:
    """An instruction and how it was made (kept in the task's metadata)."""

    text: str
    group: str
    style: str
    shape: str  # the frame or join
    cores: tuple[str, ...]


def capital(template: str) -> str:
    """The template with its first letter upper-case; one that starts with a slot (a file name,
    whose case is part of the name) is left as it is."""
    return template if template.startswith("{") else template[:1].upper() + template[1:]


def _styles(group: str) -> tuple[str, ...]:
    if group not in STYLE_GROUPS:
        raise ValueError(f"unknown wording group {group!r}; groups: {', '.join(STYLE_GROUPS)}")
    return STYLE_GROUPS[group]


def word_job(rng: random.Random, group: str, kind: str, slots: dict[str, str]) -> Wording:
    """One job (`kind`, e.g. delete_file) worded by a style of `group`, its slots filled."""
    style = rng.choice(_styles(group))
    frame, core = rng.choice(FRAMES[style]), rng.choice(CORES[style][kind])
    template = frame.replace("{core}", core).replace("{Core}", capital(core))
    return Wording(template.format(**slots, n=rng.randint(100, 999)), group, style, frame, (core,))


def word_jobs(rng: random.Random, group: str, jobs: list[tuple[str, dict[str, str]]]) -> Wording:
    """Several jobs, (kind, slots) each, in one instruction in this order, worded by one style of
    `group` (one join, a core per job)."""
    if len(jobs) < 2:
        raise ValueError("word_jobs needs two jobs or more; use word_job for one")
    style = rng.choice(_styles(group))
    join = rng.choice(JOINS[style])
    cores = tuple(rng.choice(CORES[style][kind]) for kind, _ in jobs)
    parts = []
    for i, (core, (_kind, slots)) in enumerate(zip(cores, jobs)):
        shape = join[0] if i == 0 else join[2] if i == len(jobs) - 1 else join[1]
        parts.append(shape.format(c=core.format(**slots), C=capital(core).format(**slots), i=i + 1))
    return Wording(join[3].join(parts), group, style, " | ".join(join[:3]), cores)


def shapes(group: str, kind: str) -> set[str]:
    """Every one-job sentence shape (frame with core, slots unfilled) of a group for `kind`."""
    return {f.replace("{core}", c).replace("{Core}", capital(c))
            for s in _styles(group) for f in FRAMES[s] for c in CORES[s][kind]}


def _regex(template: str, subs: dict[str, str]) -> str:
    """A regular expression for `template`: its literal text escaped, each slot `subs[slot]`, or
    one non-blank run for a slot not in `subs` (a file name or a word)."""
    out, at = [], 0
    for m in _SLOT.finditer(template):
        out += [re.escape(template[at:m.start()]), subs.get(m.group(1), r"\S+")]
        at = m.end()
    return "".join(out) + re.escape(template[at:])


@lru_cache(maxsize=256)
def _pattern(group: str, kinds: tuple[str, ...]) -> re.Pattern[str]:
    alts = []
    for style in _styles(group):
        def core(kind: str, cap: bool) -> str:
            return "(?:" + "|".join(_regex(capital(c) if cap else c, {}) for c in CORES[style][kind]) + ")"

        if len(kinds) == 1:
            alts += [_regex(f, {"core": core(kinds[0], False), "Core": core(kinds[0], True), "n": r"\d+"})
                     for f in FRAMES[style]]
            continue
        for first, middle, last, sep in JOINS[style]:
            parts = [_regex(first if i == 0 else last if i == len(kinds) - 1 else middle,
                            {"c": core(k, False), "C": core(k, True), "i": str(i + 1)})
                     for i, k in enumerate(kinds)]
            alts.append(re.escape(sep).join(parts))
    return re.compile("(?:" + "|".join(alts) + ")", re.DOTALL)


def producible(group: str, kinds: tuple[str, ...], text: str) -> bool:
    """Whether the generator of `group` can word jobs of these kinds (in this order) as `text`."""
    return _pattern(group, tuple(kinds)).fullmatch(text) is not None
