"""The sub-jobs a chained task is made of (chains.py composes them).

Each step reads the CURRENT file (the seed file, or the previous step's output) and leaves a new
current file, so every later step depends on what the earlier ones wrote. A step returns its
clause slots, one named content check (never "the file exists"), the reference command and the new
current file with its expected text.

Trained steps reuse the jobs of the trained single-step families (csv_count_rows -> count,
copy_file -> copy, rename_file -> rename) plus a new dependent one (backup: copy into a new
directory). Never-trained steps (the chains of the `unseen` split) reuse held-out jobs (csv_header
-> head) plus new ones (tail, sort). Lines are single lowercase words, so `sort` orders them the
same way in every locale.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class Current:
    """The file the next step works on, and the text it holds once the earlier steps are done."""

    path: str
    text: str

    @property
    def lines(self) -> list[str]:
        return self.text.strip().splitlines()


@dataclass(frozen=True)
class Step:
    kind: str
    slots: dict[str, str]
    check: dict[str, Any]
    command: str
    after: Current
    moved: tuple[str, str] | None = None  # (old, new) path: earlier checks on `old` now look at `new`


@dataclass(frozen=True)
class StepKind:
    name: str
    trained: bool
    needs_lines: int  # the current file must have at least this many lines
    make: Callable[[int, Current, str, str], Step]  # (index, current, new file name, new dir) -> Step


def _text_check(index: int, what: str, path: str, text: str) -> dict[str, Any]:
    return {"name": f"step {index}: {what}", "kind": "text_equals", "path": path, "value": text}


def count(i: int, cur: Current, out: str, _d: str) -> Step:
    n = len(cur.lines)
    check = {"name": f"step {i}: line count of {cur.path} in {out}", "kind": "number_equals", "path": out,
             "value": n}
    return Step("count", {"src": cur.path, "out": out}, check, f"wc -l < {cur.path} > {out}",
                Current(out, f"{n}\n"))


def copy(i: int, cur: Current, out: str, _d: str) -> Step:
    return Step("copy", {"src": cur.path, "out": out}, _text_check(i, f"{out} is a copy of {cur.path}", out, cur.text),
                f"cp {cur.path} {out}", Current(out, cur.text))


def rename(i: int, cur: Current, out: str, _d: str) -> Step:
    check = {"name": f"step {i}: {cur.path} renamed to {out}", "kind": "all", "checks": [
        {"kind": "text_equals", "path": out, "value": cur.text}, {"kind": "file_absent", "path": cur.path}]}
    return Step("rename", {"src": cur.path, "out": out}, check, f"mv {cur.path} {out}", Current(out, cur.text),
                moved=(cur.path, out))


def backup(i: int, cur: Current, _out: str, d: str) -> Step:
    dest = f"{d}/{posixpath.basename(cur.path)}"
    return Step("backup", {"src": cur.path, "d": d}, _text_check(i, f"{dest} is a copy of {cur.path}", dest, cur.text),
                f"mkdir -p {d} && cp {cur.path} {d}/", Current(dest, cur.text))


def head(i: int, cur: Current, out: str, _d: str) -> Step:
    first = cur.lines[0]
    return Step("head", {"src": cur.path, "out": out}, _text_check(i, f"first line of {cur.path} in {out}", out, first),
                f"head -n 1 {cur.path} > {out}", Current(out, first + "\n"))


def tail(i: int, cur: Current, out: str, _d: str) -> Step:
    last = cur.lines[-1]
    return Step("tail", {"src": cur.path, "out": out}, _text_check(i, f"last line of {cur.path} in {out}", out, last),
                f"tail -n 1 {cur.path} > {out}", Current(out, last + "\n"))


def sort(i: int, cur: Current, out: str, _d: str) -> Step:
    lines = sorted(cur.lines)
    check = {"name": f"step {i}: lines of {cur.path} sorted into {out}", "kind": "lines_equal", "path": out,
             "lines": lines}
    return Step("sort", {"src": cur.path, "out": out}, check, f"LC_ALL=C sort {cur.path} > {out}",
                Current(out, "\n".join(lines) + "\n"))


STEP_KINDS = (
    StepKind("count", True, 2, count),
    StepKind("copy", True, 1, copy),
    StepKind("rename", True, 1, rename),
    StepKind("backup", True, 1, backup),
    StepKind("head", False, 2, head),
    StepKind("tail", False, 2, tail),
    StepKind("sort", False, 3, sort),
)
TRAINED_STEPS = tuple(s.name for s in STEP_KINDS if s.trained)
UNSEEN_STEPS = tuple(s.name for s in STEP_KINDS if not s.trained)


def follow_move(check: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """An earlier step's check after its file was renamed from `old` to `new` (its content check
    now reads `new`; a file_absent check of `old` is the rename's own and stays)."""
    if check["kind"] == "all":
        return {**check, "checks": [follow_move(c, old, new) for c in check["checks"]]}
    if check.get("path") == old and check["kind"] != "file_absent":
        return {**check, "path": new}
    return check
