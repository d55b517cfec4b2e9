"""Deleting a host directory tree whatever its shape: no recursion, no full paths, a deadline.

``shutil.rmtree`` (Python 3.11) recurses once per directory level, so a tree a few thousand
levels deep raised RecursionError, which ``ignore_errors=True`` does not catch; its full paths
also fail past PATH_MAX. ``remove_tree`` walks with one directory fd at a time (``openat`` down,
``..`` up), keeps only names on its own stack, makes unreadable directories (mode 000) readable
before it enters them, and answers with why it stopped instead of raising.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_dir(name: str, dir_fd: int | None) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except PermissionError:  # a directory made unreadable: its owner (or root) can restore that
        os.chmod(name, 0o700, dir_fd=dir_fd, follow_symlinks=False)
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def _clear_files(fd: int) -> list[str]:
    """Unlink every non-directory in the directory `fd`; the names of its subdirectories."""
    subdirs = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(entry.name)
            else:
                try:
                    os.unlink(entry.name, dir_fd=fd)
                except FileNotFoundError:
                    pass
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
        stack.append(("", _clear_files(fd)))
        while stack:
            if time.monotonic() > deadline:
                return f"{path}: not removed within {timeout_s:g} s"
            name, pending = stack[-1]
            if pending:
                child = _open_dir(pending.pop(), fd)
                os.close(fd)
                fd = child
                stack.append((name_of(stack, pending), _clear_files(fd)))
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
