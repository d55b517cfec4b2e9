"""Reading and writing file trees as {relative path: bytes} (the form a Task holds)."""

from __future__ import annotations

from pathlib import Path

from harnessrl.tasks.model import TaskError


def read_tree(root: Path) -> dict[str, bytes]:
    """Every regular file under `root` (recursively) keyed by its POSIX path relative to root."""
    if not root.is_dir():
        return {}
    out: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            out[path.relative_to(root).as_posix()] = path.read_bytes()
    return out


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
