"""`builtin:lookup[:<split>]`: read-then-act. The instruction names a note; the note names what to
do, so the right action is known only after the first command shows the note:

| kind   | the note names        | check (step checker; pass = all)                              |
|--------|-----------------------|---------------------------------------------------------------|
| delete | one of 3 files        | that file gone AND the two others kept, byte for byte          |
| write  | a word                | the output file holds exactly that word                        |
| copy   | one of 3 files        | the output file holds that file's text (each file's differs)   |

k is the number of commands of the reference solution: k = 2 is `cat <note>` then the action;
at k = 3 the first note only says which note to read next (`cat`, `cat`, action). The word or file
never appears in the instruction, and the candidates share the note's name styles, so the note has
to be read (a guess passes a delete or copy task 1 time in 3, a write task never).
"""

from __future__ import annotations

import random
from typing import Any

from harnessrl.tasks.model import Task, text_files
from harnessrl.tasks.suite.broad import BroadSplit, broad_splits
from harnessrl.tasks.suite.multistep import step_checker_source, step_verifier
from harnessrl.tasks.suite.names import StyledPools
from harnessrl.tasks.suite.wording import word_job

LOOKUP_SPLITS: dict[str, BroadSplit] = broad_splits(train=48, held_out=16, k=2, long=(3,))
KINDS = ("delete", "write", "copy")

# what a note says (file text, not instruction wording: the same forms in every split)
NOTE_FORMS: dict[str, tuple[str, ...]] = {
    "delete": ("delete {t}", "The file to remove is {t}.", "remove: {t}", "{t} is not needed any more; delete it."),
    "write": ("word: {w}", "The word is {w}.", "Write {w}.", "use the word {w}"),
    "copy": ("copy {t}", "The file to copy is {t}.", "source: {t}", "Make a copy of {t}."),
    "next": ("See {t} for what to do.", "The details are in {t}.", "next: {t}", "Instructions moved to {t}."),
}


def _notes(rng: random.Random, names: list[str], final: str) -> dict[str, str]:
    """The chain of notes: each note but the last points to the next one; the last says `final`."""
    texts = [rng.choice(NOTE_FORMS["next"]).format(t=n) for n in names[1:]] + [final]
    return {n: t + "\n" for n, t in zip(names, texts)}


def lookup_job(rng: random.Random, p: StyledPools, kind: str, k: int
               ) -> tuple[dict[str, str], dict[str, str], list[dict[str, Any]], tuple[str, ...], dict[str, Any]]:
    """(slots, files, checks, reference solution, metadata) of one lookup task with k commands."""
    names = p.files(rng, (k - 1) + 4)
    notes, (target, other1, other2, out) = names[:k - 1], names[k - 1:]
    words = p.sample(rng, 7)
    bodies = {target: f"{words[0]} {words[1]}", other1: f"{words[2]} {words[3]}", other2: f"{words[4]} {words[5]}"}
    reads = tuple(f"cat {n}" for n in notes)
    files = {n: b + "\n" for n, b in bodies.items()}
    slots = {"note": notes[0], "out": out}
    if kind == "delete":
        final = rng.choice(NOTE_FORMS["delete"]).format(t=target)
        checks: list[dict[str, Any]] = [{"name": f"{target} deleted, {other1} and {other2} kept", "kind": "all", "checks": [
            {"kind": "file_absent", "path": target},
            {"kind": "bytes_equal", "path": other1, "value": files[other1]},
            {"kind": "bytes_equal", "path": other2, "value": files[other2]}]}]
        action, answer = f"rm {target}", target
    elif kind == "write":
        final = rng.choice(NOTE_FORMS["write"]).format(w=words[6])
        checks = [{"name": f"{out} holds the word in the note", "kind": "text_equals", "path": out, "value": words[6]}]
        action, answer = f"echo {words[6]} > {out}", words[6]
    elif kind == "copy":
        final = rng.choice(NOTE_FORMS["copy"]).format(t=target)
        checks = [{"name": f"{out} is a copy of {target}", "kind": "text_equals", "path": out, "value": bodies[target]}]
        action, answer = f"cp {target} {out}", target
    else:
        raise ValueError(f"unknown lookup kind {kind!r}; kinds: {', '.join(KINDS)}")
    files.update(_notes(rng, notes, final))
    return slots, files, checks, reads + (action,), {"answer": answer, "notes": notes, "action": kind}


def make_lookup(split: str, variant: int, checker: bytes) -> Task:
    spec = LOOKUP_SPLITS[split]
    k = spec.lengths[variant % len(spec.lengths)]
    kind = KINDS[(variant // len(spec.lengths)) % len(KINDS)]
    rng = random.Random(f"lookup:{split}:{variant}")
    slots, files, checks, solution, meta = lookup_job(rng, spec.pools, kind, k)
    wording = word_job(rng, spec.group, f"lookup_{kind}", slots)
    meta = {**slots, **meta, "k": k, "max_turns": k + 2, "wording_group": wording.group, "style": wording.style,
            "shape": wording.shape, "cores": list(wording.cores), "trained_family": True}
    return Task(id=f"lookup-{split}-{variant:02d}", instruction=wording.text, files=text_files(files),
                verifier=step_verifier(checks, checker), category="lookup", split=split, family=f"lookup_{kind}",
                variant=variant, reference_solution=solution, metadata=meta, source="builtin")


def build_lookup(splits: tuple[str, ...] = tuple(LOOKUP_SPLITS)) -> list[Task]:
    """The lookup tasks of these splits, ordered by split, then variant (kind and k cycle)."""
    checker = step_checker_source()
    return [make_lookup(s, v, checker) for s in splits for v in range(LOOKUP_SPLITS[s].size)]
