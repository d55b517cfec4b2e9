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


def safe_members(tar: tarfile.TarFile) -> list[tarfile.TarInfo]:
    """Members safe to extract on the host: regular files, dirs and links that stay inside the
    tree; anything else (absolute paths, '..', links out, devices) is skipped with a warning.
    Setuid/setgid/sticky bits are dropped. Same on every Python (no reliance on tar filters)."""
    keep = []
    for m in tar.getmembers():
        ok = _inside(m.name) and (m.isfile() or m.isdir() or m.issym() or m.islnk())
        if ok and m.issym():
            ok = _inside(posixpath.join(posixpath.dirname(m.name), m.linkname))
        elif ok and m.islnk():
            ok = _inside(m.linkname)
        if not ok:
            log.warning("copy_out skipped %s (unsafe path, link or file type)", m.name)
            continue
        m.mode &= 0o777
        keep.append(m)
    return keep


def extract_safely(tar: tarfile.TarFile, dest: Path) -> None:
    members = safe_members(tar)
    if hasattr(tarfile, "fully_trusted_filter"):  # members are vetted above
        tar.extractall(dest, members=members, filter="fully_trusted")
    else:
        tar.extractall(dest, members=members)
