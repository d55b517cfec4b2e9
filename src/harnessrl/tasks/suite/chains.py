"""The `chain` family: k sub-jobs (steps.py) composed into ONE instruction, k = 1..6, each later
step working on what the earlier ones wrote (count the lines of a.log into n.txt, copy n.txt into
backup/, ...). Each step has its own named content check; the task passes when all of them do.

| split      | k     | steps                              | names and values     | wording                 |
|------------|-------|------------------------------------|----------------------|-------------------------|
| train      | 1-3   | trained steps                      | TRAIN pools          | training clauses/joins  |
| test       | 1-3   | trained steps                      | TEST pools           | training clauses/joins  |
| long       | 4-6   | trained steps                      | TEST pools           | training clauses/joins  |
| unseen     | 1-3   | >= 1 never-trained step            | TEST pools           | training + unseen ones  |
| paraphrase | 1-3   | trained steps                      | paraphrase pools     | paraphrase clauses/joins|

Variant v of split s comes from the seed "chain:<s>:<v>"; its k cycles through the split's
lengths. The metadata carries k and `max_turns` (2 + 2k) for the run config.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from harnessrl.tasks.model import Task, text_files
from harnessrl.tasks.suite.chain_words import (PARAPHRASE_CLAUSES, PARAPHRASE_JOINS, TRAINING_CLAUSES,
                                               TRAINING_JOINS, UNSEEN_CLAUSES, compose)
from harnessrl.tasks.suite.multistep import max_turns_for, step_checker_source, step_verifier
from harnessrl.tasks.suite.paraphrase import PARAPHRASE_POOLS
from harnessrl.tasks.suite.pools import TEST, TRAIN, Pools
from harnessrl.tasks.suite.steps import STEP_KINDS, Current, Step, StepKind, follow_move

REDUCING = ("count", "head", "tail")  # leave a one-line file


@dataclass(frozen=True)
class ChainSplit:
    lengths: tuple[int, ...]
    per_length: int
    pools: Pools
    paraphrased: bool = False
    unseen_steps: bool = False  # at least one never-trained step in every chain


CHAIN_SPLITS = {
    "train": ChainSplit((1, 2, 3), 16, TRAIN),
    "test": ChainSplit((1, 2, 3), 8, TEST),
    "long": ChainSplit((4, 5, 6), 8, TEST),
    "unseen": ChainSplit((1, 2, 3), 8, TEST, unseen_steps=True),
    "paraphrase": ChainSplit((1, 2, 3), 8, PARAPHRASE_POOLS, paraphrased=True),
}


def _seed_lines(rng: random.Random, p: Pools) -> list[str]:
    words = p.sample(rng, 5)
    lines = words[:2] + [rng.choice(words) for _ in range(rng.randint(1, 6))]  # >= 2 distinct lines
    while lines == sorted(lines):  # sorting must change something
        rng.shuffle(lines)
    return lines


def _pick(rng: random.Random, cur: Current, prev: str, force_unseen: bool, keep_lines: bool,
          allow_unseen: bool) -> StepKind:
    options = [s for s in STEP_KINDS if s.name != prev and len(cur.lines) >= s.needs_lines
               and not (s.name == "rename" and prev in ("copy", "backup"))  # would make that step moot
               and (s.trained or allow_unseen) and not (keep_lines and s.name in REDUCING)]
    if force_unseen:
        options = [s for s in options if not s.trained]
    return rng.choice(options)


def _clause(rng: random.Random, kind: StepKind, paraphrased: bool) -> str:
    table = UNSEEN_CLAUSES if not kind.trained else PARAPHRASE_CLAUSES if paraphrased else TRAINING_CLAUSES
    return rng.choice(table[kind.name])


def make_chain(split: str, variant: int, checker: bytes) -> Task:
    spec = CHAIN_SPLITS[split]
    k = spec.lengths[variant % len(spec.lengths)]
    rng = random.Random(f"chain:{split}:{variant}")
    p = spec.pools
    names, dirs = p.files(rng, k + 1), rng.sample(p.dirs, k)
    seed = Current(names[0], "\n".join(_seed_lines(rng, p)) + "\n")
    unseen_at = rng.randrange(k) if spec.unseen_steps else -1
    cur, steps, checks, templates = seed, list[Step](), list[dict[str, Any]](), list[str]()
    for i in range(k):
        kind = _pick(rng, cur, steps[-1].kind if steps else "", force_unseen=i == unseen_at,
                     keep_lines=i < unseen_at, allow_unseen=spec.unseen_steps)
        step: Step = kind.make(i + 1, cur, names[i + 1], dirs[i])
        if step.moved:
            checks = [follow_move(c, *step.moved) for c in checks]
        template = _clause(rng, kind, spec.paraphrased)
        steps.append(step)
        checks.append(step.check)
        templates.append(template)
        cur = step.after
    joins = PARAPHRASE_JOINS if spec.paraphrased else TRAINING_JOINS
    join = (variant // len(spec.lengths)) % len(joins)
    instruction = compose([t.format(**s.slots) for t, s in zip(templates, steps)], joins[join])
    meta: dict[str, Any] = {
        "k": k, "max_turns": max_turns_for(k), "steps": [s.kind for s in steps], "clauses": templates,
        "join": join, "seed_file": seed.path, "final_file": cur.path, "answer": cur.text.strip(),
        "trained_family": not spec.unseen_steps,
        "never_trained_steps": [s.kind for s in steps if s.kind in {x.name for x in STEP_KINDS if not x.trained}],
    }
    return Task(id=f"chain-{split}-{variant:02d}", instruction=instruction, files=text_files({seed.path: seed.text}),
                verifier=step_verifier(checks, checker), category="chain", split=split, family="chain",
                variant=variant, reference_solution=tuple(s.command for s in steps), metadata=meta,
                source="builtin")


def build_chains(splits: tuple[str, ...] = tuple(CHAIN_SPLITS)) -> list[Task]:
    """The chained tasks of these splits, ordered by split, then variant (k cycles within a split)."""
    checker = step_checker_source()
    return [make_chain(split, v, checker) for split in splits
            for v in range(CHAIN_SPLITS[split].per_length * len(CHAIN_SPLITS[split].lengths))]
