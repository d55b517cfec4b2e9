"""Copying files in and out of a sandbox as tar streams, never through host paths.

Inside, ``tar`` runs as the sandbox user (so a link planted by the harness resolves inside the
sandbox); on the host, only members that stay inside the destination are extracted.
"""

from __future__ import annotations

import logging
import posixpath
import tarfile
from pathlib import Path

log = logging.getLogger(__name__)

COPY_OUT = (
    'if [ -d "$1" ]; then exec tar -c -f - -C "$1" .; '
    'else exec tar -c -f - -C "$(dirname -- "$1")" -- "$(basename -- "$1")"; fi'
)
COPY_IN = 'mkdir -p -- "$1" && exec tar -x --no-same-owner -f - -C "$1"'


def _inside(path: str) -> bool:
    """A relative archive path that stays inside the extraction directory."""
    norm = posixpath.normpath(path)
    return not posixpath.isabs(path) and norm != ".." and not norm.startswith("../")


def _through_link(path: str, links: set[str]) -> bool:
    """Whether `path`, walked component by component as the file system would (before any
    normalisation: ``sub/..`` goes INTO sub), enters one of the symlinks kept so far."""
    cur: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if cur:
                cur.pop()
            continue
        cur.append(part)
        if "/".join(cur) in links:
            return True
    return False


def safe_members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """Members safe to extract on the host: regular files, dirs and links that stay inside the
    tree; anything else (absolute paths, '..', links out, devices) is skipped with a warning.
    A member whose path, or whose link target, goes through a symlink kept earlier is skipped
    too: checking each link's target as text alone let chains escape (``a/sub -> ..`` then
    ``a/q -> sub/..`` then ``a/q/x`` wrote outside the destination). Setuid/setgid/sticky bits
    are dropped. Same on every Python (no reliance on tar filters)."""
    keep, links = [], set()
    for m in tar.getmembers():
        name = posixpath.normpath(m.name)
        ok = _inside(m.name) and (m.isfile() or m.isdir() or m.issym() or m.islnk())
        ok = ok and not _through_link(posixpath.dirname(m.name), links)
        if ok and m.issym():
            target = posixpath.join(posixpath.dirname(m.name), m.linkname)
            ok = _inside(target) and not _through_link(target + "/x", links)
        elif ok and m.islnk():
            ok = _inside(m.linkname) and not _through_link(m.linkname + "/x", links)
        if not ok:
            log.warning("copy_out skipped %s (unsafe path, link or file type)", m.name)
            continue
        if m.issym():
            links.add(name)
        m.mode &= 0o777
        keep.append(m)
    return keep


def extract_safely(tar: tarfile.TarFile, dest: Path) -> None:
    members = safe_members(tar)
    if hasattr(tarfile, "fully_trusted_filter"):  # members are vetted above
        tar.extractall(dest, members=members, filter="fully_trusted")
    else:
        tar.extractall(dest, members=members)
