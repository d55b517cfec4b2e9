"""Host-side handling of agent-made directory trees: bounded, iterative, under a deadline.

Everything the runner does on the host to a tree an agent made (the copy out of a sandbox, the
verifier's copy, cleanup, the sweep of old scratch dirs) goes through here or through
``tarcopy.py``, and none of it recurses:

- ``TreeLimits``: entries, depth, path length (bytes, relative to the tree's root) and bytes (the
  apparent size of each distinct file: a sparse file counts its full length, a hard link costs an
  entry but not its size again, since every copy here keeps it a link), and a deadline. Passing one
  raises ``WorkspaceLimitExceeded`` (a WorkspaceLost: the workspace's doing, scored 0 by the runner
  with the status ``workspace_limit``), naming the limit.
- ``copy_tree``: a file or directory tree copied with an explicit stack; hard links stay links,
  sparse files keep their holes (SEEK_DATA/SEEK_HOLE), symlinks are copied as links (never
  followed), fifos, sockets and devices are left out.
- ``remove_tree``: deletion with one directory fd at a time (``openat`` down, ``..`` up), keeping
  only names on its own stack, so no depth or path length stops it; it answers with why it stopped
  instead of raising. ``shutil.rmtree`` (Python 3.11) recursed once per level, so a tree a few
  thousand levels deep raised RecursionError, which ``ignore_errors=True`` does not catch.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnessrl.errors import HarnessRLError
from harnessrl.sandbox.base import WorkspaceLost

log = logging.getLogger(__name__)

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
CHUNK = 1 << 20
UNFINISHED = "not removed within"  # remove_tree's answer when its time ran out (progress is kept)
SYMLINK_COST = 4096  # bytes a symlink is counted at (tmpfs keeps a long target in a page of its own)
# errors of a copy that the tree's own shape causes (the destination is sized like the source)
SHAPE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.ENAMETOOLONG, errno.ELOOP, errno.EMLINK, errno.EFBIG)


class WorkspaceLimitExceeded(WorkspaceLost):
    """A workspace tree passed a host-side limit (entries, depth, path length, bytes, time) or did
    not fit a copy of its own size. `limit` names which; the rollout is scored 0 (`workspace_limit`)."""

    def __init__(self, limit: str, message: str) -> None:
        super().__init__(f"workspace limit ({limit}): {message}")
        self.limit = limit


class HostCopyFailed(HarnessRLError, OSError):
    """A host-side copy failed for the host's own reason (its disk, its permissions) on a tree
    within every limit: infrastructure, not the workspace's doing. Deliberately NOT a SandboxError
    (the runner counts an OSError as the host's)."""


@dataclass(frozen=True)
class TreeLimits:
    """What the host handles of one agent-made tree. `max_bytes` None: no byte cap."""

    max_entries: int = 100_000
    max_depth: int = 128
    max_path_bytes: int = 2048
    max_bytes: int | None = 1 << 30
    deadline_s: float = 120.0

    @classmethod
    def for_workspace(cls, workspace_mb: int, **kw: Any) -> TreeLimits:
        """Limits for a sandbox's workspace: bytes capped at its tmpfs size (a copy then always fits)."""
        return cls(max_bytes=workspace_mb << 20, **kw)


@dataclass
class TreeBudget:
    """The running count of one tree against its limits (one per copy; not shared)."""

    limits: TreeLimits
    entries: int = 0
    bytes: int = 0
    deadline: float = field(default=0.0)
    _inodes: set[tuple[int, int]] = field(default_factory=set)

    def __post_init__(self) -> None:
        if not self.deadline:
            self.deadline = time.monotonic() + self.limits.deadline_s

    def check_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise WorkspaceLimitExceeded("time", f"not handled within {self.limits.deadline_s:g} s "
                                         f"({self.entries} entries so far)")

    def entry(self, rel: str, size: int = 0, inode: tuple[int, int] | None = None) -> None:
        """Count one entry at workspace-relative path `rel` (its `size` once per `inode`)."""
        lim = self.limits
        self.entries += 1
        if self.entries > lim.max_entries:
            raise WorkspaceLimitExceeded("entries", f"more than {lim.max_entries} files, dirs and links")
        depth = rel.count("/") + 1
        if depth > lim.max_depth:
            raise WorkspaceLimitExceeded("depth", f"{rel[:120]!r}... is {depth} levels deep (at most {lim.max_depth})")
        if len(os.fsencode(rel)) > lim.max_path_bytes:
            raise WorkspaceLimitExceeded("path", f"a path of {len(os.fsencode(rel))} bytes (at most "
                                         f"{lim.max_path_bytes}): {rel[:120]!r}...")
        if inode is not None:
            if inode in self._inodes:
                return
            self._inodes.add(inode)
        self.bytes += size
        if lim.max_bytes is not None and self.bytes > lim.max_bytes:
            raise WorkspaceLimitExceeded("bytes", f"more than {lim.max_bytes >> 20} MiB (apparent size, "
                                         "sparse files at full length)")
        if self.entries % 256 == 0:
            self.check_time()


def _copy_data(src_fd: int, dst_fd: int, size: int, budget: TreeBudget) -> None:
    """The data segments of a regular file (holes stay holes), then its length."""
    pos = 0
    while pos < size:
        try:
            start = os.lseek(src_fd, pos, os.SEEK_DATA)
            end = os.lseek(src_fd, start, os.SEEK_HOLE)
        except OSError as e:
            if e.errno != errno.ENXIO:  # ENXIO: no data past pos (a trailing hole)
                start, end = pos, size  # no SEEK_DATA here: copy the rest as it is
            else:
                break
        end = min(end, size)
        os.lseek(src_fd, start, os.SEEK_SET)
        os.lseek(dst_fd, start, os.SEEK_SET)
        left = end - start
        while left > 0:
            chunk = os.read(src_fd, min(CHUNK, left))
            if not chunk:
                left = 0
                break
            view = memoryview(chunk)
            while view:
                view = view[os.write(dst_fd, view):]
            left -= len(chunk)
            budget.check_time()
        pos = end
    os.ftruncate(dst_fd, size)


def _copy_file(src: str, dst: str, st: os.stat_result, budget: TreeBudget) -> None:
    src_fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        dst_fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            _copy_data(src_fd, dst_fd, st.st_size, budget)
            os.fchmod(dst_fd, stat.S_IMODE(st.st_mode) & 0o777)
        finally:
            os.close(dst_fd)
    finally:
        os.close(src_fd)
    os.utime(dst, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)


def copy_tree(src: Path | str, dst: Path | str, limits: TreeLimits | None = None, *,
              budget: TreeBudget | None = None) -> TreeBudget:
    """Copy a directory's contents into `dst` (created if missing) or a file to the path `dst`,
    iteratively and within `limits` (or an open `budget`, its deadline included); the budget spent.
    WorkspaceLimitExceeded past a limit or when the destination refuses the tree's shape (full,
    names too long); HostCopyFailed for any other OSError. What was copied before a failure
    stays: the caller removes `dst`."""
    budget = budget or TreeBudget(limits or TreeLimits())
    src, dst = os.fspath(src), os.fspath(dst)
    try:
        _copy(src, dst, budget)
    except WorkspaceLimitExceeded:
        raise
    except OSError as e:
        if e.errno in SHAPE_ERRNOS:
            raise WorkspaceLimitExceeded("shape", f"the copy was refused: {e.strerror} ({e.filename})") from None
        raise HostCopyFailed(e.errno, f"host-side copy failed: {e.strerror}", e.filename) from None
    return budget


def _copy(src: str, dst: str, budget: TreeBudget) -> None:
    st = os.lstat(src)
    if not stat.S_ISDIR(st.st_mode):
        budget.entry(os.path.basename(src), st.st_size, (st.st_dev, st.st_ino))
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(src), dst)
        elif stat.S_ISREG(st.st_mode):
            _copy_file(src, dst, st, budget)
        return
    os.makedirs(dst, exist_ok=True)
    links: dict[tuple[int, int], str] = {}  # (dev, ino) of a multiply-linked file -> its first copy
    modes: list[tuple[str, int]] = [(dst, stat.S_IMODE(st.st_mode))]  # set last: a 0o555 dir must take children
    stack = [""]  # relative directories still to list
    while stack:
        rel_dir = stack.pop()
        budget.check_time()
        with os.scandir(os.path.join(src, rel_dir) if rel_dir else src) as entries:
            for entry in entries:
                rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
                s = entry.stat(follow_symlinks=False)
                inode = (s.st_dev, s.st_ino)
                size = s.st_size if stat.S_ISREG(s.st_mode) else 0
                size = SYMLINK_COST if stat.S_ISLNK(s.st_mode) else size
                budget.entry(rel, size, inode if stat.S_ISREG(s.st_mode) else None)
                target = os.path.join(dst, rel)
                if stat.S_ISDIR(s.st_mode):
                    _make_dir(target)
                    modes.append((target, stat.S_IMODE(s.st_mode)))
                    stack.append(rel)
                elif stat.S_ISLNK(s.st_mode):
                    os.symlink(os.readlink(entry.path), target)
                elif stat.S_ISREG(s.st_mode):
                    if s.st_nlink > 1 and inode in links:
                        os.link(links[inode], target)
                        continue
                    _copy_file(entry.path, target, s, budget)
                    if s.st_nlink > 1:
                        links[inode] = target
                else:
                    log.warning("copy skipped %s (a fifo, socket or device)", rel)
    for path, mode in reversed(modes):
        os.chmod(path, (mode & 0o777) | 0o700)


def _make_dir(path: str) -> None:
    """A new directory at `path`, or the one already there (never a link to one)."""
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            raise


def _open_dir(name: str, dir_fd: int | None) -> int:
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:  # a directory made unreadable: its owner (or root) can restore that
        os.chmod(name, 0o700, dir_fd=dir_fd, follow_symlinks=False)
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    try:  # entries can only be unlinked from a writable directory (root aside)
        if stat.S_IMODE(os.fstat(fd).st_mode) & 0o700 != 0o700:
            os.fchmod(fd, 0o700)
    except OSError:
        pass
    return fd


def _clear_files(fd: int, deadline: float) -> list[str]:
    """Unlink every non-directory in the directory `fd`; the names of its subdirectories."""
    subdirs = []
    with os.scandir(fd) as entries:
        for i, entry in enumerate(entries):
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(entry.name)
            else:
                try:
                    os.unlink(entry.name, dir_fd=fd)
                except FileNotFoundError:
                    pass
            if i % 1024 == 1023 and time.monotonic() > deadline:
                break
    return subdirs


def remove_tree(path: Path | str, *, timeout_s: float = 30.0) -> str:
    """Delete `path` (a file, a link or a directory tree of any depth); "" once it is gone, else
    why it is not (it never raises): an entry that cannot be removed, or `timeout_s` spent."""
    deadline = time.monotonic() + timeout_s
    path = os.fspath(path)
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
            return ""
    except FileNotFoundError:
        return ""
    except OSError as e:
        return f"{path}: {e.strerror or e}"
    fd = -1
    # one frame per level below `path`: (this directory's name in its parent, subdirectories left)
    stack: list[tuple[str, list[str]]] = []
    try:
        fd = _open_dir(path, None)
        stack.append(("", _clear_files(fd, deadline)))
        while stack:
            if time.monotonic() > deadline:
                return f"{path}: {UNFINISHED} {timeout_s:g} s"
            name, pending = stack[-1]
            if pending:
                child_name = pending.pop()
                child = _open_dir(child_name, fd)
                os.close(fd)
                fd = child
                stack.append((child_name, _clear_files(fd, deadline)))
                continue
            stack.pop()
            if not stack:
                break
            parent = os.open("..", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = parent
            os.rmdir(name, dir_fd=fd)
        os.close(fd)
        fd = -1
        os.rmdir(path)
        return ""
    except OSError as e:
        return f"{path}: {e.strerror or e} (at depth {len(stack)})"
    finally:
        if fd >= 0:
            os.close(fd)


def place_tree(unpacked: Path, dest: Path, budget: TreeBudget) -> None:
    """Move the tree `unpacked` to `dest` (renamed when `dest` is missing or an empty dir: no
    second copy on the host), else merge it in with a bounded copy (links and holes kept)."""
    try:
        if dest.is_dir() and not dest.is_symlink() and not any(dest.iterdir()):
            dest.rmdir()
        if not dest.exists() and not dest.is_symlink():
            os.rename(unpacked, dest)
            return
    except OSError:  # another file system (EXDEV), or dest appeared meanwhile
        pass
    copy_tree(unpacked, dest, budget=budget)


def sweep_dead_owners(tmp: Path, prefix: str, stale_prefix: str, *, budget_s: float = 10.0,
                      remove: Callable[..., str] = remove_tree) -> list[str]:
    """Remove the dirs `tmp`/<prefix><pid>-* whose owner pid is gone (not this process) within
    `budget_s` (all of them together); never raises. One that cannot be removed (an error, not
    the budget: the next sweep goes on where this one stopped) is renamed <stale_prefix><pid>-...
    so that later sweeps skip it. Both are logged and named in the returned list."""
    problems: list[str] = []
    deadline = time.monotonic() + budget_s
    try:
        found = list(tmp.glob(prefix + "*-*"))
    except OSError as e:
        return [f"{tmp}: {e.strerror or e}"]
    for d in found:
        owner = d.name[len(prefix):].split("-", 1)[0]
        if not owner.isdigit() or int(owner) == os.getpid() or Path(f"/proc/{owner}").exists():
            continue
        why = remove(d, timeout_s=max(0.1, deadline - time.monotonic()))
        if not why or not (d.exists() or d.is_symlink()):  # removed, or by a sweep of another process meanwhile
            continue
        problems.append(why)
        if UNFINISHED in why:
            log.warning("scratch dir of a dead owner not removed yet, the next sweep goes on: %s", why)
            continue
        try:
            os.rename(d, d.with_name(stale_prefix + d.name[len(prefix):]))
        except OSError:
            pass
        log.warning("stale scratch dir not removed, skipped from now on (delete it by hand): %s", why)
    return problems
