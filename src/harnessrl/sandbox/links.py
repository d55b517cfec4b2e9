"""Where a symbolic link of an agent-made tree leads, resolved against the tree's root alone.

One resolver for every host-side check of links (the host copy, ``tarcopy.safe_members``, and the
verifier's copy, ``views.vet_links``), walking a target component by component as the kernel
would: ``sub/..`` goes INTO ``sub`` first (through it, if it is a link), every link met on the way
is followed (at most ``MAX_HOPS``, like the kernel's 40), and the root of the tree is the end of
the world: a ``..`` there, or an absolute target that does not start with the tree's own mount
path, leaves it. The tree is read through a ``TreeView`` (the final tree of an archive, or a
directory on the host), so the answer never depends on the order in which its entries were made.

Outcomes (``Resolution.kind``):
- ``inside``: an entry of the tree (file or directory) that is not protected;
- ``protected``: a path at or under one of the ``protected`` paths (the verifier's own files),
  also when that path is missing from the tree (it is excluded from the copy and mounted later);
- ``system``: an absolute target in the read-only system directories (``SYSTEM_DIRS``, written
  without ``.`` or ``..``), such as a virtualenv's ``bin/python -> /usr/bin/python3``: out of the
  tree but constant, nothing a verifier writes or holds;
- ``outside``: anywhere else out of the tree (``..`` above the root, ``/tmp``, ``/proc/self/cwd``,
  ``/logs/verifier``, ``/tests``);
- ``dangling``: a component is missing (or a file is used as a directory): the target names nothing
  now. ``could_escape`` / ``could_protect``: the rest of it, read as text, would leave the tree or
  reach a protected path if the missing part were made later;
- ``loop``: more than ``MAX_HOPS`` links.
"""

from __future__ import annotations

import os
import posixpath
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

MAX_HOPS = 40
SYSTEM_DIRS = frozenset({"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"})
Kind = Literal["dir", "file", "link"]
Parts = tuple[str, ...]


class TreeView(Protocol):
    def kind(self, parts: Parts) -> Kind | None:
        """What is at `parts` (relative to the root), without following a link there; None: nothing."""

    def target(self, parts: Parts) -> str:
        """The target of the link at `parts`."""


@dataclass(frozen=True)
class Resolution:
    kind: Literal["inside", "protected", "system", "outside", "dangling", "loop"]
    path: Parts = ()  # where the walk ended (inside, protected, dangling: the parts reached)
    could_escape: bool = False
    could_protect: bool = False

    @property
    def reaches(self) -> str:
        """What a refused link reaches, in words for a status ("verifier_files" or "outside")."""
        return "verifier_files" if self.kind == "protected" or self.could_protect else "outside"


def split(path: str) -> Parts:
    """A relative path's components (no '', no '.'); '..' is kept."""
    return tuple(p for p in path.split("/") if p not in ("", "."))


def _is_protected(parts: Parts, protected: frozenset[Parts]) -> bool:
    return any(parts[:len(p)] == p for p in protected)


def _absolute(target: str, mount: Parts | None) -> tuple[str, list[str]]:
    """An absolute target: ("tree", components left below the root) when it starts with the
    tree's mount path, ("system", []) for a plain path in SYSTEM_DIRS, else ("outside", [])."""
    parts = target.split("/")
    names = [p for p in parts if p not in ("", ".")]
    plain = ".." not in names and posixpath.normpath(target) == target.rstrip("/") or target == "/"
    if mount is not None:
        prefix = names[:len(mount)]
        if tuple(prefix) == mount and ".." not in prefix:
            return "tree", names[len(mount):]
    if plain and names and names[0] in SYSTEM_DIRS:
        return "system", []
    return "outside", []


def resolve(tree: TreeView, start: Parts, target: str, *, mount: Parts | None = None,
            protected: frozenset[Parts] = frozenset()) -> Resolution:
    """Where the link in directory `start` (parts below the root) with `target` leads in `tree`.

    `mount`: the absolute path the tree is mounted at where the link is followed (an absolute
    target under it lands in the tree); None: every absolute target leaves the tree."""
    cur = list(start)
    todo: list[str] = []  # components still to walk, last one first
    hops = 0

    def push(text: str) -> str:
        nonlocal cur
        if text.startswith("/"):
            where, rest = _absolute(text, mount)
            if where != "tree":
                return where
            cur = []
            todo.extend(reversed(rest))
        else:
            todo.extend(reversed(text.split("/")))
        return ""

    ended = push(target)
    if ended:
        return Resolution(ended)  # type: ignore[arg-type]
    while todo:
        c = todo.pop()
        if c in ("", "."):
            continue
        if c == "..":
            if not cur:
                return Resolution("outside")
            cur.pop()
            continue
        nxt = (*cur, c)
        if _is_protected(nxt, protected):
            return Resolution("protected", nxt)
        kind = tree.kind(nxt)
        if kind == "link":
            hops += 1
            if hops > MAX_HOPS:
                return Resolution("loop", nxt)
            ended = push(tree.target(nxt))
            if ended:
                return Resolution(ended)  # type: ignore[arg-type]
            continue
        if kind is None or (kind == "file" and any(x not in ("", ".") for x in todo)):
            return _dangling(nxt, todo, protected)
        cur = list(nxt)
    return Resolution("inside", tuple(cur))


def _dangling(at: Parts, todo: list[str], protected: frozenset[Parts]) -> Resolution:
    """The rest of a target past a missing component, read as text: could it leave the tree or
    reach a protected path once that component exists?"""
    cur = list(at)
    escape = guarded = False
    for c in reversed(todo):
        if c in ("", "."):
            continue
        if c == "..":
            if not cur:
                escape = True
                break
            cur.pop()
            continue
        cur.append(c)
        guarded = guarded or _is_protected(tuple(cur), protected)
    return Resolution("dangling", at, could_escape=escape, could_protect=guarded)


class HostTree:
    """A directory on the host as a TreeView (lstat only: nothing is followed)."""

    def __init__(self, root: Path) -> None:
        self.root = os.fspath(root)

    def _path(self, parts: Parts) -> str:
        return os.path.join(self.root, *parts)

    def kind(self, parts: Parts) -> Kind | None:
        try:
            mode = os.lstat(self._path(parts)).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return None
        if stat.S_ISLNK(mode):
            return "link"
        return "dir" if stat.S_ISDIR(mode) else "file"

    def target(self, parts: Parts) -> str:
        return os.readlink(self._path(parts))


def relative_link(link_dir: Parts, to: Parts) -> str:
    """The relative target from directory `link_dir` to `to` (both below the same root)."""
    return posixpath.relpath("/".join(("",) + to) or "/", "/".join(("",) + link_dir) or "/")
