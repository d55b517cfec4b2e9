"""Reading and writing file trees as {relative path: bytes} (the form a Task holds).

Task directories may come from anyone, so `TaskDataReader` reads them as data, never as links
into the host: only regular files and directories are accepted, a symbolic link is refused
wherever it points (also inside the task: the rule is simplest to check and to state), and so is
a fifo, socket or device. Every file is `lstat`-ed, checked against `TaskLimits` *before* it is
read, then opened with O_NOFOLLOW relative to its already opened parent directory, so a path
swapped for a link between the check and the read is refused too. A loaded Task holds bytes only;
`write_tree` later writes them as new regular files, which is all a sandbox ever copies in.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from harnessrl.tasks.model import TaskDataError, TaskError

MAX_FILE_BYTES = 16 << 20  # one task file (input, reward or verifier file, data_entry.json, task.toml)
MAX_TASK_BYTES = 64 << 20  # all files of one task together
MAX_TASK_FILES = 4096  # files in one task
MAX_TASK_DEPTH = 32  # directory levels below a task's input_files/, reward/, workspace/, verifier/

_OPEN_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_OPEN_DIR = _OPEN_FILE | os.O_DIRECTORY
_LINK_FIX = ("task data must be regular files and directories, and links are refused wherever "
             "they point; replace the link by a copy of what it names (e.g. `cp -rL`, after checking "
             "that it belongs in the task)")


@dataclass(frozen=True)
class TaskLimits:
    """Bounds on the data of one task, checked from `stat` before anything is read."""

    max_file_bytes: int = MAX_FILE_BYTES
    max_task_bytes: int = MAX_TASK_BYTES
    max_files: int = MAX_TASK_FILES
    max_depth: int = MAX_TASK_DEPTH


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "symbolic link"), (stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return "special file"


class TaskDataReader:
    """Reads the files of one task directory (a context manager: it holds the directory open)."""

    def __init__(self, task_dir: Path, limits: TaskLimits | None = None) -> None:
        self.task_dir = Path(task_dir)
        self.limits = limits or TaskLimits()
        self.total_bytes = 0
        self.n_files = 0
        try:
            self._fd = os.open(self.task_dir, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            raise TaskError(f"{self.task_dir}: cannot open the task directory ({e.strerror})") from e

    def __enter__(self) -> "TaskDataReader":
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        os.close(self._fd)

    def exists(self, rel: str) -> bool:
        """Whether the task directory has an entry `rel` (a link counts: reading it is refused)."""
        try:
            os.lstat(rel, dir_fd=self._fd)
        except FileNotFoundError:
            return False
        return True

    def read_file(self, rel: str) -> bytes:
        """The content of the regular file `rel` (a name directly in the task directory)."""
        return self._read_file(self._fd, rel, self.task_dir / rel)

    def read_text(self, rel: str) -> str:
        """`read_file` decoded as UTF-8; TaskDataError with the byte offset when it is not."""
        data = self.read_file(rel)
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TaskDataError(f"{self.task_dir / rel}: not valid UTF-8 at byte {e.start} ({e.reason}); "
                                "save the file as UTF-8") from e

    def read_tree(self, rel: str) -> dict[str, bytes]:
        """Every file under the directory `rel` keyed by its POSIX path relative to it ({} if absent)."""
        if not self.exists(rel):
            return {}
        out: dict[str, bytes] = {}
        fd = self._open_dir(self._fd, rel, self.task_dir / rel)
        try:
            self._walk(fd, self.task_dir / rel, "", 0, out)
        finally:
            os.close(fd)
        return out

    def _walk(self, fd: int, where: Path, prefix: str, depth: int, out: dict[str, bytes]) -> None:
        if depth > self.limits.max_depth:
            raise TaskDataError(f"{where}: directories nested more than {self.limits.max_depth} levels "
                                "deep; flatten the task's files")
        with os.scandir(fd) as entries:
            names = sorted(e.name for e in entries)
        for name in names:
            path, key = where / name, prefix + _checked_name(where, name)
            st = self._lstat(fd, name, path)
            if stat.S_ISDIR(st.st_mode):
                sub = self._open_dir(fd, name, path)
                try:
                    self._walk(sub, path, key + "/", depth + 1, out)
                finally:
                    os.close(sub)
            else:
                out[key] = self._read_file(fd, name, path)

    def _lstat(self, fd: int, name: str, path: Path) -> os.stat_result:
        try:
            st = os.lstat(name, dir_fd=fd)
        except OSError as e:
            raise TaskError(f"{path}: cannot read ({e.strerror})") from e
        if stat.S_ISLNK(st.st_mode):
            raise TaskDataError(f"{path}: is a symbolic link (to {_link_target(fd, name)!r}); {_LINK_FIX}")
        if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)):
            raise TaskDataError(f"{path}: is a {_kind(st.st_mode)}, not a regular file or directory; "
                                "remove it from the task directory")
        return st

    def _open_dir(self, fd: int, name: str, path: Path) -> int:
        st = self._lstat(fd, name, path)
        if not stat.S_ISDIR(st.st_mode):
            raise TaskDataError(f"{path}: must be a directory, found a file")
        try:
            return os.open(name, _OPEN_DIR, dir_fd=fd)
        except OSError as e:  # ELOOP: it became a link after the lstat
            raise TaskDataError(f"{path}: changed while being read ({e.strerror}); {_LINK_FIX}") from e

    def _read_file(self, fd: int, name: str, path: Path) -> bytes:
        st = self._lstat(fd, name, path)
        if not stat.S_ISREG(st.st_mode):
            raise TaskDataError(f"{path}: must be a file, found a directory")
        allowed = self._admit(path, st.st_size)
        try:
            file_fd = os.open(name, _OPEN_FILE, dir_fd=fd)
        except OSError as e:
            raise TaskDataError(f"{path}: changed while being read ({e.strerror}); {_LINK_FIX}") from e
        with os.fdopen(file_fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise TaskDataError(f"{path}: changed while being read (no longer a regular file)")
            data = f.read(allowed + 1)
        if len(data) > allowed:
            raise TaskDataError(f"{path}: grew past {allowed} bytes while being read")
        self.total_bytes += len(data) - st.st_size  # _admit counted the stat size
        return data

    def _admit(self, path: Path, size: int) -> int:
        """Count a file of `size` bytes against the limits; returns the bytes it may still have."""
        lim = self.limits
        if size > lim.max_file_bytes:
            raise TaskDataError(f"{path}: {size} bytes, over the limit of {lim.max_file_bytes} bytes per "
                                "task file; shrink the file (or load with a larger "
                                "TaskLimits.max_file_bytes)")
        if self.total_bytes + size > lim.max_task_bytes:
            raise TaskDataError(f"{path}: {size} bytes brings the task's files to {self.total_bytes + size} "
                                f"bytes, over the limit of {lim.max_task_bytes} bytes per task; make the "
                                "task smaller (or load with a larger TaskLimits.max_task_bytes)")
        if self.n_files + 1 > lim.max_files:
            raise TaskDataError(f"{path}: the task has more than {lim.max_files} files; make the task "
                                "smaller (or load with a larger TaskLimits.max_files)")
        self.total_bytes += size
        self.n_files += 1
        return min(lim.max_file_bytes, lim.max_task_bytes - self.total_bytes + size)


def _checked_name(where: Path, name: str) -> str:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise TaskDataError(f"{where / name!r}: file name is not valid UTF-8; rename it") from None
    return name


def _link_target(fd: int, name: str) -> str:
    try:
        return os.readlink(name, dir_fd=fd)
    except OSError:
        return "?"


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    """Write `files` under `root`, creating parent directories. Rejects paths that escape root."""
    root.mkdir(parents=True, exist_ok=True)
    base = root.resolve()
    for rel, content in files.items():
        target = (root / rel).resolve()
        if base != target and base not in target.parents:
            raise TaskError(f"file path {rel!r} escapes its directory {root}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        if rel.endswith(".sh"):
            target.chmod(0o755)
