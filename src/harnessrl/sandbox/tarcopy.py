"""Copying files in and out of a sandbox as tar streams, never through host paths.

Inside, ``tar`` runs as the sandbox user (so a link planted by the harness resolves inside the
sandbox), GNU tar with ``--sparse`` (holes stay holes; hard links are link members already). On
the host the stream is first counted against TreeLimits (treeops.py: entries, depth, path length,
apparent bytes; WorkspaceLimitExceeded past one), then only members that stay inside the
destination are extracted, one by one under the same deadline: every link checked against the
final tree the archive makes, whatever the order of its members (``safe_members``, sandbox/links.py).
"""

from __future__ import annotations

import logging
import os
import posixpath
import shutil
import tarfile
from collections.abc import Iterator
from typing import IO
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from harnessrl.sandbox.base import SandboxError
from harnessrl.sandbox.links import Kind, Parts, resolve, split
from harnessrl.sandbox.treeops import SYMLINK_COST, HostCopyFailed, TreeBudget, WorkspaceLimitExceeded, place_tree

log = logging.getLogger(__name__)

COPY_IN = 'mkdir -p -- "$1" && exec tar -x --no-same-owner -f - -C "$1"'


def _inside(path: str) -> bool:
    """A relative archive path that stays inside the extraction directory."""
    norm = posixpath.normpath(path)
    return not posixpath.isabs(path) and norm != ".." and not norm.startswith("../")


# The members safe_members skipped, for whoever asked (``collect_skipped``): the verifier's copy
# (sandbox/views.py) scores a link that pointed out of the workspace instead of dropping it unseen.
_SKIPPED: ContextVar[list[dict[str, str]] | None] = ContextVar("harnessrl_tar_skipped", default=None)


@contextmanager
def collect_skipped() -> Iterator[list[dict[str, str]]]:
    """Within this block (this thread / context), every member ``safe_members`` skips is appended
    to the yielded list as {"name", "type", "linkname", "why"}."""
    found: list[dict[str, str]] = []
    token = _SKIPPED.set(found)
    try:
        yield found
    finally:
        _SKIPPED.reset(token)


class _ArchiveTree:
    """The tree an archive's members make once all are extracted (a links.TreeView): a name is
    its member's kind, or a directory when it is only the parent of other members."""

    def __init__(self, members: list[tuple[Parts, tarfile.TarInfo]]) -> None:
        self.entries = {parts: m for parts, m in members}
        self.parents = {parts[:i] for parts, _ in members for i in range(1, len(parts))}

    def kind(self, parts: Parts) -> Kind | None:
        m = self.entries.get(parts)
        if m is not None:
            return "link" if m.issym() else "dir" if m.isdir() else "file"
        return "dir" if parts in self.parents or not parts else None

    def target(self, parts: Parts) -> str:
        return self.entries[parts].linkname


def safe_members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """Members safe to extract on the host: regular files, dirs and links that stay inside the
    tree; anything else (absolute paths, '..', links out, devices, a second member of one name)
    is skipped with a warning. Links are checked against the FINAL tree, whatever the order of
    the archive (sandbox/links.py): a member whose path goes through a symlink of that tree is
    skipped; a symlink is kept only if it resolves, following every link of the tree, to an entry
    inside it (or names nothing, and could not leave it once the missing part existed; a loop is
    skipped); a hard
    link only if it names a regular file of the tree through no symlink. Checking each link against
    the links before it let ``p -> q/..`` (before ``q -> .``) reach the parent of the host copy.
    Setuid/setgid/sticky bits are dropped. Same on every Python (no reliance on tar filters)."""
    skipped = _SKIPPED.get()

    def skip(m: tarfile.TarInfo, why: str) -> None:
        log.warning("copy_out skipped %s (%s)", m.name, why)
        if skipped is not None:
            kind = "symlink" if m.issym() else "hardlink" if m.islnk() else "dir" if m.isdir() else \
                "file" if m.isfile() else "special"
            skipped.append({"name": m.name, "type": kind, "linkname": m.linkname, "why": why})

    candidates: list[tuple[Parts, tarfile.TarInfo]] = []
    seen: set[Parts] = set()
    for m in tar.getmembers():
        parts = split(m.name)
        if not _inside(m.name) or ".." in parts:
            skip(m, "a path out of the tree")
        elif not (m.isfile() or m.isdir() or m.issym() or m.islnk()):
            skip(m, "not a file, directory or link")
        elif parts in seen:
            skip(m, "a second member of the same name")
        else:
            seen.add(parts)
            candidates.append((parts, m))
    tree = _ArchiveTree(candidates)
    keep: list[tarfile.TarInfo] = []
    for parts, m in candidates:
        why = ""
        if any(tree.kind(parts[:i]) == "link" for i in range(1, len(parts))):
            why = "its path goes through a symlink"
        elif m.issym():
            r = resolve(tree, parts[:-1], m.linkname)
            if not (r.kind == "inside" or (r.kind == "dangling" and not r.could_escape)):
                why = f"a symlink that leads out of the tree ({r.kind})"
        elif m.islnk():
            target = split(m.linkname)
            through = any(tree.kind(target[:i]) == "link" for i in range(1, len(target)))
            if not _inside(m.linkname) or ".." in target or through or tree.kind(target) != "file":
                why = "a hard link to no regular file of the tree"
        if why:
            skip(m, why)
            continue
        m.mode &= 0o777
        keep.append(m)
    return keep


def pack(src: Path, dest: str, fileobj: IO[bytes]) -> str:
    """Write `src` (a host file or directory) as a tar to `fileobj` for COPY_IN to unpack at the
    inner path `dest`; the inner directory to unpack it in."""
    is_dir = src.is_dir() and not src.is_symlink()
    with tarfile.open(fileobj=fileobj, mode="w") as tar:
        tar.add(src, arcname="." if is_dir else posixpath.basename(dest))
    fileobj.seek(0)
    return dest if is_dir else posixpath.dirname(dest)


def archive_cap_mb(budget: TreeBudget) -> int | None:
    """The most MiB a tar of a tree within `budget`'s limits can take (headers, long names): the
    RLIMIT_FSIZE of the tar inside. None: no byte cap."""
    lim = budget.limits
    if lim.max_bytes is None:
        return None
    return -(-(lim.max_bytes + lim.max_entries * (1536 + 2 * lim.max_path_bytes)) >> 20) + 1


def check_archive(tar_path: Path, cap_mb: int | None) -> None:
    """WorkspaceLimitExceeded when the archive reached its cap (its deadline is the snapshot's own:
    snapshot.write_archive counts time against the TreeBudget)."""
    size = tar_path.stat().st_size if tar_path.exists() else 0
    if cap_mb is not None and size >= cap_mb << 20:
        raise WorkspaceLimitExceeded("bytes", f"its archive passed {cap_mb} MiB")


def count_members(tar: tarfile.TarFile, budget: TreeBudget) -> None:
    """Read every member header, counting each against `budget` (WorkspaceLimitExceeded past a
    limit, before anything is extracted). A hard link costs an entry; a sparse member its full size."""
    for m in tar:
        rel = posixpath.normpath(m.name)
        if rel in (".", ""):
            continue
        size = m.size if m.isfile() else SYMLINK_COST if m.issym() else 0
        budget.entry(rel.lstrip("/"), size)


def extract_safely(tar: tarfile.TarFile, dest: Path, budget: TreeBudget | None = None) -> None:
    """Extract the safe members (safe_members) into `dest`, one at a time, checking `budget`'s
    deadline; modes (no set-id bits) and mtimes kept, owners not (the host copy is the runner's)."""
    members = safe_members(tar)
    trusted = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}  # vetted above
    dirs = []
    for i, m in enumerate(members):
        if budget is not None and i % 256 == 255:
            budget.check_time()
        tar.extract(m, dest, set_attrs=False, **trusted)  # type: ignore[arg-type]
        target = dest / m.name
        if m.isdir():
            dirs.append((target, m.mode))
        elif m.isfile():
            target.chmod(m.mode & 0o777)
            os.utime(target, (m.mtime, m.mtime), follow_symlinks=False)
    for target, mode in reversed(dirs):  # last: a read-only directory must take its children first
        target.chmod((mode & 0o777) | 0o700)


def unpack_archive(tar_path: Path, unpacked: Path, dest: Path, name: str, budget: TreeBudget) -> None:
    """The archive a copy out wrote at `tar_path` into `dest`: counted (WorkspaceLimitExceeded
    before anything is written), extracted into the fresh dir `unpacked`, then moved to `dest`
    (a directory's archive, members under "."; else the member `name`). HostCopyFailed when the
    host's disk fails."""
    unpacked.mkdir()
    try:
        with tarfile.open(tar_path) as tar:
            count_members(tar, budget)
            names = tar.getnames()
            extract_safely(tar, unpacked, budget)
    except tarfile.TarError as e:
        raise SandboxError(f"copy out: unreadable archive: {e}") from None
    except OSError as e:  # every member is within the limits: the host's disk
        raise HostCopyFailed(e.errno, f"host-side extraction failed: {e.strerror}", e.filename) from None
    if names and names[0] in (".", "./"):
        place_tree(unpacked, dest, TreeBudget(budget.limits, deadline=budget.deadline))
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(unpacked / name), dest)
