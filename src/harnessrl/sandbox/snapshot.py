"""The copy-out of a bwrap sandbox, read from the host side: no program of the sandbox runs for it.

A sandbox on an image (rootfs.py) has a writable ``/``: the agent may replace the image's ``/bin/sh``
and ``tar``, or move a read-only bind aside (renaming a directory moves the mounts below it) and
plant a program where the runner's was. A copy-out that starts anything inside would then run the
agent's code after its harness ended. So this process writes the archive itself:

- ``inner_src`` is opened with ``openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)`` from the fd of the
  sandbox's root that the sandbox object holds: its links resolve as they would inside (an absolute
  one against the sandbox's ``/``), never against the host's, and never through ``/proc`` magic links;
- below it nothing is followed: every directory is opened ``O_NOFOLLOW`` relative to its parent's
  fd, a symlink is archived as a link, a hard link as a link member, a FIFO, socket or device is left
  out (the host copy keeps none of them);
- a file with holes becomes a PAX 1.0 sparse member (holes stay holes on the host, as GNU tar's
  ``--sparse`` kept them);
- each entry is counted against the copy's TreeBudget (entries, depth, path, bytes: hard-linked data
  once, sparse files at full length) under its deadline, so an oversized tree stops early with
  WorkspaceLimitExceeded, before its bytes are read.

The archive has the layout ``tar -C DIR .`` (a directory) or ``tar -C PARENT NAME`` (anything else)
wrote: tarcopy.unpack_archive takes it from there (safe members only).
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import posixpath
import stat
import tarfile
from typing import BinaryIO

from harnessrl.sandbox.base import SandboxError
from harnessrl.sandbox.treeops import SYMLINK_COST, HostCopyFailed, TreeBudget

log = logging.getLogger(__name__)

SYS_OPENAT2 = 437  # the same number on every architecture (the unified syscall table)
RESOLVE_NO_MAGICLINKS, RESOLVE_IN_ROOT = 0x02, 0x10
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
COPY_BUFFER = 1 << 20


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def open_in_root(root_fd: int, path: str, flags: int) -> int:
    """An fd for ``path`` resolved inside the tree whose root is ``root_fd``, as a process chrooted
    there would see it (``..`` and absolute links stop at that root; no magic links). OSError."""
    libc = ctypes.CDLL(None, use_errno=True)
    how = _OpenHow(flags, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS)
    fd = libc.syscall(ctypes.c_long(SYS_OPENAT2), ctypes.c_int(root_fd), ctypes.c_char_p(os.fsencode(path)),
                      ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
    if fd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{os.strerror(err)} (openat2)", path)
    return int(fd)


def write_archive(root_fd: int, inner_src: str, out: BinaryIO, budget: TreeBudget) -> None:
    """A tar of ``inner_src`` (an absolute path inside the sandbox whose root is ``root_fd``) into
    ``out``: SandboxError when it does not exist or cannot be read, WorkspaceLimitExceeded past a
    limit of ``budget``."""
    try:
        top = open_in_root(root_fd, inner_src, DIR_FLAGS)  # a directory (or a link to one, as `tar -C`)
    except NotADirectoryError:
        top = -1
    except OSError as e:
        raise SandboxError(f"copy_out {inner_src} failed: {e.strerror}") from None
    try:
        with tarfile.TarFile(fileobj=out, mode="w", format=tarfile.PAX_FORMAT, copybufsize=COPY_BUFFER) as tar:
            if top >= 0:
                info = _info(".", os.fstat(top), tarfile.DIRTYPE)
                tar.addfile(info)
                _add_dir(tar, top, ".", budget, {})
                return
            parent_path = posixpath.dirname(inner_src.rstrip("/")) or "/"
            try:
                parent = open_in_root(root_fd, parent_path, DIR_FLAGS)
            except OSError as e:
                raise SandboxError(f"copy_out {inner_src} failed: {e.strerror}") from None
            try:
                name = posixpath.basename(inner_src.rstrip("/"))
                if not _add_entry(tar, parent, name, name, budget, {}):
                    raise SandboxError(f"copy_out {inner_src} failed: not a file, directory or link")
            finally:
                os.close(parent)
    except FileNotFoundError as e:
        raise SandboxError(f"copy_out {inner_src} failed: {e.filename}: no such file") from None
    except tarfile.TarError as e:
        raise SandboxError(f"copy_out {inner_src} failed: {e}") from None
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):  # the host's disk, where the archive goes
            raise HostCopyFailed(e.errno, f"host-side archive failed: {e.strerror}", e.filename) from None
        raise SandboxError(f"copy_out {inner_src} failed: {e}") from None
    finally:
        if top >= 0:
            os.close(top)


def _info(arcname: str, st: os.stat_result, kind: bytes, size: int = 0, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(arcname)
    info.type, info.size, info.linkname = kind, size, link
    info.mode = stat.S_IMODE(st.st_mode)
    info.mtime = int(st.st_mtime)
    return info


def _add_dir(tar: tarfile.TarFile, fd: int, prefix: str, budget: TreeBudget, seen: dict[tuple[int, int], str]) -> None:
    for name in sorted(os.listdir(fd)):
        _add_entry(tar, fd, name, f"{prefix}/{name}", budget, seen)


def _add_entry(tar: tarfile.TarFile, dir_fd: int, name: str, arcname: str, budget: TreeBudget,
               seen: dict[tuple[int, int], str]) -> bool:
    """Archive ``name`` (in the directory ``dir_fd``) as ``arcname``, a directory with all below it;
    False for a type the host copy does not keep (FIFO, socket, device)."""
    st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    rel = arcname[2:] if arcname.startswith("./") else arcname
    if stat.S_ISDIR(st.st_mode):
        budget.entry(rel)
        sub = os.open(name, DIR_FLAGS | os.O_NOFOLLOW, dir_fd=dir_fd)
        try:
            tar.addfile(_info(arcname, st, tarfile.DIRTYPE))
            _add_dir(tar, sub, arcname, budget, seen)
        finally:
            os.close(sub)
    elif stat.S_ISLNK(st.st_mode):
        budget.entry(rel, SYMLINK_COST)
        tar.addfile(_info(arcname, st, tarfile.SYMTYPE, link=os.readlink(name, dir_fd=dir_fd)))
    elif stat.S_ISREG(st.st_mode):
        inode = (st.st_dev, st.st_ino)
        if st.st_nlink > 1 and inode in seen:
            budget.entry(rel, 0, inode)
            tar.addfile(_info(arcname, st, tarfile.LNKTYPE, link=seen[inode]))
            return True
        budget.entry(rel, st.st_size, inode)
        if st.st_size:
            _add_file(tar, dir_fd, name, arcname, st)
        else:  # nothing to read (every process of the rollout is dead: it stays empty)
            tar.addfile(_info(arcname, st, tarfile.REGTYPE))
        seen[inode] = arcname
        budget.check_time()
    else:
        log.warning("copy_out left out %s (not a file, directory or link)", arcname)
        return False
    return True


def _add_file(tar: tarfile.TarFile, dir_fd: int, name: str, arcname: str, st: os.stat_result) -> None:
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as f:
        now = os.fstat(f.fileno())
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(now.st_mode):
            raise OSError(errno.ESTALE, "changed while it was archived", arcname)
        try:
            if now.st_blocks * 512 < now.st_size:  # holes: a sparse member, the holes stay holes
                data = _SparseData(f.fileno(), data_segments(f.fileno(), now.st_size))
                info = _info(f"./GNUSparseFile.0/{posixpath.basename(arcname)}", now, tarfile.REGTYPE, data.size)
                info.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0", "GNU.sparse.name": arcname,
                                    "GNU.sparse.realsize": str(now.st_size)}
                tar.addfile(info, data)  # type: ignore[arg-type]
            else:
                tar.addfile(_info(arcname, now, tarfile.REGTYPE, size=now.st_size), f)
        except OSError as e:
            raise SandboxError(f"copy_out: {arcname} could not be read whole: {e}") from None


def data_segments(fd: int, size: int) -> list[tuple[int, int]]:
    """(offset, length) of the parts of a file that hold data (SEEK_DATA/SEEK_HOLE), ending with
    a (size, 0) marker so that a trailing hole keeps the file's length."""
    segments, offset = [], 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:  # only a hole from here
                break
            raise
        end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        segments.append((start, end - start))
        offset = end
    return [*segments, (size, 0)]


class _SparseData:
    """The data of a PAX 1.0 sparse member (what GNU tar writes with --sparse --format=pax, and
    tarfile extracts as holes): the map as text padded to a block, then the data segments."""

    def __init__(self, fd: int, segments: list[tuple[int, int]]) -> None:
        text = f"{len(segments)}\n" + "".join(f"{off}\n{n}\n" for off, n in segments)
        self._map = text.encode() + b"\0" * (-len(text) % tarfile.BLOCKSIZE)
        self._fd, self._segments = fd, [seg for seg in segments if seg[1]]
        self.size = len(self._map) + sum(n for _, n in self._segments)

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes, short only at the end (tarfile's copy wants whole buffers)."""
        out = bytearray(self._map[:n])
        self._map = self._map[n:]
        while len(out) < n and self._segments:
            off, left = self._segments[0]
            chunk = os.pread(self._fd, min(n - len(out), left), off)
            if not chunk:
                break  # the file shrank: tarfile reports the short member
            out += chunk
            if len(chunk) == left:
                self._segments.pop(0)
            else:
                self._segments[0] = (off + len(chunk), left - len(chunk))
        return bytes(out)
