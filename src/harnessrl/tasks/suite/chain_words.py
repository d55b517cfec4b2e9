"""Wordings of the chained tasks: one clause per step kind, and the ways clauses are joined.

`TRAINING_CLAUSES` word the trained steps in train, test and long chains; `UNSEEN_CLAUSES` the
never-trained steps (unseen chains); `PARAPHRASE_CLAUSES` and `PARAPHRASE_JOINS` the paraphrased
chains, in words and sentence shapes training never shows (the tests check the skeletons are
disjoint). Each clause names every slot of its step: {src}, and {out} or {d}.
"""

from __future__ import annotations

TRAINING_CLAUSES: dict[str, tuple[str, ...]] = {
    "count": ("count the lines of {src} and write the number to {out}",
              "write the number of lines in {src} to {out}",
              "save the line count of {src} in {out}"),
    "copy": ("copy {src} to {out}",
             "make a copy of {src} named {out}",
             "duplicate {src} as {out}"),
    "rename": ("rename {src} to {out}",
               "move {src} to the new name {out}",
               "change the name of {src} to {out}"),
    "backup": ("copy {src} into a new directory {d}/",
               "create the directory {d} and copy {src} into it",
               "make a folder {d} and put a copy of {src} in it"),
}

UNSEEN_CLAUSES: dict[str, tuple[str, ...]] = {
    "head": ("write the first line of {src} to {out}",
             "save the top line of {src} in {out}"),
    "tail": ("write the last line of {src} to {out}",
             "save the bottom line of {src} in {out}"),
    "sort": ("sort the lines of {src} alphabetically and write them to {out}",
             "write the lines of {src} in sorted order to {out}"),
}

PARAPHRASE_CLAUSES: dict[str, tuple[str, ...]] = {
    "count": ("tally how many lines {src} holds and record that figure in {out}",
              "find out how long {src} is in lines; {out} should hold just that figure"),
    "copy": ("clone {src} so that {out} holds identical text",
             "{out} should become an exact replica of {src}"),
    "rename": ("{src} ought to be called {out} from now on, with no file left under the old name",
               "give {src} the name {out} instead"),
    "backup": ("stash a replica of {src} inside a fresh folder called {d}",
               "a folder {d} is needed, holding a duplicate of {src}"),
}

# (first, middle, last) connectors for prose; the numbered form lists the clauses instead.
TRAINING_JOINS = (
    ("First, ", "Then ", "Finally, "),
    ("Start by doing this: ", "Next, ", "Last, "),
    ("numbered", "Do these steps in order:", ""),
)
PARAPHRASE_JOINS = (
    ("To begin with, ", "Once that is done, ", "To wrap up, "),
    ("Here is the plan. Step one: ", "Afterwards, ", "As the closing move, "),
    ("lettered", "I need a small pipeline run, in this sequence:", ""),
)


def compose(clauses: list[str], join: tuple[str, str, str]) -> str:
    """One instruction from the filled clauses of a chain, in the order the steps must run."""
    first, middle, last = join
    if first in ("numbered", "lettered"):
        marks = "123456" if first == "numbered" else "abcdef"
        return " ".join([middle] + [f"({marks[i]}) {c}." for i, c in enumerate(clauses)])
    if len(clauses) == 1:
        only = clauses[0]
        starts_with_name = "." in only.split()[0]  # a file name keeps its case
        return (only if starts_with_name else only[0].upper() + only[1:]) + "."
    parts = [first + clauses[0] + "."]
    parts += [middle + c + "." for c in clauses[1:-1]]
    parts.append(last + clauses[-1] + ".")
    return " ".join(parts)
