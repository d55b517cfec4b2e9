"""Per-sandbox cgroups: the memory and process limits, and a reliable "kill everything".

Layout (cgroup v1, what this machine has; v2 takes the same shape in the unified tree)::

    <pids hierarchy>/<our cgroup>/harnessrl-<hostpid>-<id>/     pids.max = max_procs
        init/      the bwrap process and everything it starts
        run-<n>/   one per Sandbox.run() call; killed as a unit on timeout
    <memory hierarchy>/<our cgroup>/harnessrl-<hostpid>-<id>/   memory.limit_in_bytes

A new process joins by writing its own pid into each ``cgroup.procs`` of ``join_files(leaf)``
before it execs (so nothing it forks escapes). ``create`` returns ``None`` where cgroups are not
writable (non-root, no delegation); the bwrap backend then falls back to rlimits.
Directories left by a crashed host process (its pid is in the name) are swept on the next create.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

PREFIX = "harnessrl-"


def _mounts() -> dict[str, tuple[str, str]]:
    """controller ('pids', 'memory', or 'unified') -> (mount root, mount point)."""
    found: dict[str, tuple[str, str]] = {}
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rfields = left.split(), right.split()
            if len(fields) < 5 or len(rfields) < 3:
                continue
            fstype, superopts = rfields[0], rfields[2].split(",")
            if fstype == "cgroup2":
                found.setdefault("unified", (fields[3], fields[4]))
            elif fstype == "cgroup":
                for ctl in ("pids", "memory"):
                    if ctl in superopts:
                        found.setdefault(ctl, (fields[3], fields[4]))
    return found


def _own_paths() -> dict[str, str]:
    """controller -> this process's cgroup path ('unified' for the v2 entry)."""
    paths: dict[str, str] = {}
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, ctls, path = line.rstrip("\n").split(":", 2)
            for ctl in ctls.split(",") if ctls else ["unified"]:
                paths[ctl] = path
    return paths


def _own_dir(ctl: str, mounts: dict[str, tuple[str, str]], own: dict[str, str]) -> Path | None:
    if ctl not in mounts or ctl not in own:
        return None
    root, point = mounts[ctl]
    path = own[ctl]
    if root != "/" and path.startswith(root):
        path = path[len(root) :]
    return Path(point) / path.lstrip("/")


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _procs(d: Path) -> list[int]:
    pids: list[int] = []
    for procs in d.rglob("cgroup.procs"):
        try:
            pids += [int(x) for x in procs.read_text().split()]
        except OSError:
            pass
    return pids


def kill_cgroup(d: Path, rounds: int = 400) -> bool:
    """SIGKILL every process in ``d`` and below until it is empty; True when empty."""
    kill_file = d / "cgroup.kill"
    if kill_file.exists():
        try:
            _write(kill_file, "1")
        except OSError:
            pass
    for _ in range(rounds):
        pids = _procs(d)
        if not pids:
            return True
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.002)
    return not _procs(d)


def remove_cgroup(d: Path) -> None:
    """Kill what is left and remove ``d`` and its children (deepest first)."""
    if not d.is_dir():
        return
    kill_cgroup(d)
    for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        try:
            sub.rmdir()
        except OSError:
            pass
    try:
        d.rmdir()
    except OSError:
        pass


def _sweep_stale(parent: Path) -> None:
    for d in parent.glob(PREFIX + "*"):
        try:
            owner = int(d.name[len(PREFIX) :].split("-", 1)[0])
        except ValueError:
            continue
        if owner != os.getpid() and not Path(f"/proc/{owner}").exists():
            remove_cgroup(d)


@dataclass
class SandboxCgroups:
    pids_dir: Path  # the sandbox's dir in the hierarchy that holds the leaves (pids or unified)
    other_dirs: list[Path]  # v1: the memory dir (no leaves)

    @classmethod
    def create(cls, memory_mb: int | None, max_procs: int | None) -> SandboxCgroups | None:
        """Make this sandbox's cgroups with the limits set; None if cgroups are not usable."""
        try:
            return cls._create(memory_mb, max_procs)
        except OSError:
            return None

    @classmethod
    def _create(cls, memory_mb: int | None, max_procs: int | None) -> SandboxCgroups | None:
        mounts, own = _mounts(), _own_paths()
        name = f"{PREFIX}{os.getpid()}-{uuid.uuid4().hex[:10]}"
        pids_parent, mem_parent = _own_dir("pids", mounts, own), _own_dir("memory", mounts, own)
        if pids_parent is not None and mem_parent is not None:  # v1
            made: list[Path] = []
            try:
                for v1_parent in (pids_parent, mem_parent):
                    _sweep_stale(v1_parent)
                    (v1_parent / name).mkdir()
                    made.append(v1_parent / name)
                if max_procs is not None:
                    _write(made[0] / "pids.max", str(max_procs))
                if memory_mb is not None:
                    _write(made[1] / "memory.limit_in_bytes", str(memory_mb << 20))
                    try:  # no swap beyond the limit, where swap accounting exists
                        _write(made[1] / "memory.memsw.limit_in_bytes", str(memory_mb << 20))
                    except OSError:
                        pass
            except OSError:
                for d in made:
                    remove_cgroup(d)
                raise
            return cls(made[0], [made[1]])
        parent = _own_dir("unified", mounts, own)
        if parent is None:
            return None
        _write(parent / "cgroup.subtree_control", "+pids +memory")  # fails without delegation
        _sweep_stale(parent)
        d = parent / name
        d.mkdir()
        try:
            if max_procs is not None:
                _write(d / "pids.max", str(max_procs))
            if memory_mb is not None:
                _write(d / "memory.max", str(memory_mb << 20))
                try:
                    _write(d / "memory.swap.max", "0")
                except OSError:
                    pass
        except OSError:
            remove_cgroup(d)
            raise
        return cls(d, [])

    def join_files(self, leaf: str) -> list[Path]:
        """Create the leaf; the cgroup.procs files a new process must write its pid into."""
        leaf_dir = self.pids_dir / leaf
        leaf_dir.mkdir(exist_ok=True)
        return [leaf_dir / "cgroup.procs"] + [d / "cgroup.procs" for d in self.other_dirs]

    def add_pids(self, leaf: str, pids: list[int]) -> None:
        """Move running processes into ``leaf`` (for processes that cannot join themselves)."""
        for procs in self.join_files(leaf):
            for pid in pids:
                _write(procs, str(pid))

    def kill_leaf(self, leaf: str, rounds: int = 400) -> bool:
        return kill_cgroup(self.pids_dir / leaf, rounds)

    def remove_leaf(self, leaf: str) -> None:
        """Remove an emptied leaf (a leaf with daemons left in it stays until destroy)."""
        try:
            (self.pids_dir / leaf).rmdir()
        except OSError:
            pass

    def limit_events(self, leaf: str | None = None) -> dict[str, int]:
        """Counters of limit hits so far: 'memory' (OOM kills), 'procs' (forks refused; the
        kernel counts these in the cgroup of the forking process, so pass its leaf)."""
        counts = {"memory": 0, "procs": 0}
        dirs = [self.pids_dir, *self.other_dirs] + ([self.pids_dir / leaf] if leaf else [])
        for d in dirs:
            for name, key, field in (
                ("memory.oom_control", "memory", "oom_kill"),  # v1
                ("memory.events", "memory", "oom_kill"),  # v2
                ("pids.events", "procs", "max"),
            ):
                try:
                    lines = (d / name).read_text().splitlines()
                except OSError:
                    continue
                for line in lines:
                    k, _, v = line.partition(" ")
                    if k == field and v.strip().isdigit():
                        counts[key] += int(v)
        return counts

    def remove(self) -> None:
        for d in [self.pids_dir, *self.other_dirs]:
            remove_cgroup(d)
