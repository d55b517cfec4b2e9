"""A fresh sandbox holding a copy of another one's workspace: where a verifier runs.

    with fresh_view(agent_sandbox, exclude=[".verifier"], ro_dirs={"/workspace/.verifier": host_dir}) as v:
        v.run(["python3", ".verifier/verify.py"])

The copy goes through ``copy_out`` (tar inside, as the sandbox user; on the host only members
that stay inside are kept, sandbox/tarcopy.py), so nothing of the first sandbox (its processes,
HOME, /tmp, links that leave the workspace) reaches the new one but the workspace's files.

Links are resolved against the copy's root alone before the view starts (``vet_links``): the
verifier's files are mounted inside the workspace (``.verifier/``, ``reward/``, ``.harbor-tests/``),
so a link the agent made (``sorted.txt -> .verifier/expected.txt``) would otherwise read them as
the agent's answer. A link that leads into the verifier's files or out of the workspace is
refused (``WorkspaceLinkRefused``: the rollout scores 0 as ``workspace_link``), one that names
nothing is removed, one that stays in the workspace (or reaches a read-only system file, as a
virtualenv's ``bin/python`` does) is kept.

The view's /proc is read-only (``SandboxConfig.read_only_proc``): code the verifier runs on purpose
(the agent's module, its tests) cannot write into another process through ``/proc/<pid>/mem``,
even one that is dumpable (a ``bash reward.sh``). The seccomp profile denies the ptrace family in
every sandbox; the step checker adds its own layers (docs/security.md, "The verifier and the code
it runs").
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any

from harnessrl.sandbox.base import Sandbox, SandboxError, WorkspaceLost
from harnessrl.sandbox.factory import make_sandbox
from harnessrl.sandbox.links import HostTree, Parts, Resolution, relative_link, resolve, split
from harnessrl.sandbox.tarcopy import collect_skipped


class WorkspaceLinkRefused(WorkspaceLost):
    """The workspace holds a link the verifier must not follow: into the verifier's own files, or
    out of the workspace. The policy's doing: the rollout is scored 0 as ``workspace_link``."""

    def __init__(self, path: str, target: str, reaches: str, more: int = 0) -> None:
        also = f" (and {more} more)" if more else ""
        where = "into the verifier's files" if reaches == "verifier_files" else "out of the workspace"
        super().__init__(f"workspace link refused: {path} -> {target} leads {where}{also}")
        self.path, self.target, self.reaches, self.more = path, target, reaches, more

    def detail(self) -> dict[str, Any]:
        return {"path": self.path, "target": self.target, "reaches": self.reaches, "more": self.more}


def fresh_view(sandbox: Sandbox, *, exclude: Sequence[str] = (),
               ro_dirs: Mapping[str, Path] | None = None, read_only_proc: bool = True,
               timings: dict[str, float] | None = None, check_links: bool = True) -> Sandbox:
    """A NEW sandbox of `sandbox`'s config (no proxy) whose workspace is a copy of its workspace.

    ``exclude``: workspace-relative paths left out of the copy (a link on the way is removed
    itself, never followed). ``ro_dirs``: inner path -> host directory, shown read-only where the
    backend binds (bwrap), copied in otherwise. ``read_only_proc``: the view's /proc read-only
    (bwrap; False only to measure what it costs). WorkspaceLost when the workspace cannot be copied
    out (the sandbox died), SandboxError when the new sandbox cannot start. ``timings``: filled
    with the seconds of the copy-out (``copy_out_s``, the link check included) and of
    the new sandbox's start (``sandbox_s``). ``check_links``: ``vet_links`` on the copy, with the
    excluded paths protected (WorkspaceLinkRefused); False only to show what it stops.
    """
    ro = dict(ro_dirs or {})
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="harnessrl-view-") as tmp:
        copy = Path(tmp) / "workspace"
        copy.mkdir()
        try:
            if not sandbox.alive:
                raise SandboxError("the sandbox is gone (its keeper was killed?)")
            with collect_skipped() as skipped:
                sandbox.copy_out(sandbox.inner_workspace, copy)
        except SandboxError as e:
            raise WorkspaceLost(f"the workspace could not be copied out: {e}") from None
        for rel in exclude:
            remove_inside(copy, rel)
        if check_links:
            vet_links(copy, sandbox.inner_workspace, exclude, skipped, given_links(sandbox))
        t_copied = time.monotonic()
        cfg = sandbox.config.model_copy(update={"read_only_proc": read_only_proc})
        if ro and sandbox.read_only_binds:
            binds = [f"{host}:{sandbox.inner_path(inner)}" for inner, host in ro.items()]
            cfg = cfg.model_copy(update={"extra_ro_binds": [*cfg.extra_ro_binds, *binds]})
        view = make_sandbox(cfg, workspace_src=copy, proxy=None)
    if not sandbox.read_only_binds:
        try:
            for inner, host in ro.items():
                view.copy_in(host, inner)
        except BaseException:
            view.destroy()
            raise
    if timings is not None:
        timings.update(copy_out_s=t_copied - t0, sandbox_s=time.monotonic() - t_copied)
    return view


def remove_inside(root: Path, rel: str) -> None:
    """Delete root/rel (file, link or tree) if it is there. A link met on the way is removed
    itself and nothing past it is touched, so `rel` never reaches outside `root`."""
    parts = PurePosixPath(rel).parts
    if not parts or ".." in parts or PurePosixPath(rel).is_absolute():
        raise SandboxError(f"exclude paths are workspace-relative without '..', got {rel!r}")
    target = root
    for part in parts:
        target = target / part
        if target.is_symlink():
            target.unlink()
            return
        if not target.exists():
            return
    if target.is_dir():
        shutil.rmtree(target)
    else:
        target.unlink()


def vet_links(root: Path, mount: str, protected: Sequence[str] = (), skipped: Sequence[Mapping[str, str]] = (),
              given: Mapping[str, str] | None = None) -> dict[str, int]:
    """Resolve every symbolic link of the copy at `root` against `root` alone (sandbox/links.py),
    before anything reads it. `mount`: where the workspace was mounted for the agent (an absolute
    target below it is a link inside, rewritten as a relative one); `protected`: workspace-relative
    paths of the verifier's own files (missing from the copy, mounted later); `skipped`: the
    members the copy-out left out (tarcopy.collect_skipped), whose links are judged the same way
    (one that stays inside is put back, relative); `given`: links the task's own starting
    workspace holds (an image's), {path: target}, kept as they are.

    A link that leads into a protected path, or out of the workspace (other than to a read-only
    system file), raises WorkspaceLinkRefused naming the first one (by path) and how many more
    there are; a link that names nothing (or loops) is removed. Counts of what was done."""
    tree = HostTree(root)
    guard = frozenset(split(p) for p in protected)
    where = split(mount) if mount.startswith("/") else None
    given = given or {}
    refused: list[tuple[str, str, Resolution]] = []
    counts = {"links": 0, "restored": 0, "removed": 0, "given": 0}

    def judge(parts: Parts, target: str) -> Resolution:
        return resolve(tree, parts[:-1], target, mount=where, protected=guard)

    pending = [(split(m["name"]), m["linkname"]) for m in skipped if m.get("type") == "symlink"]
    pending = [(p, t) for p, t in pending if p and ".." not in p]
    changed = True
    while changed:  # put back what stays inside (one may lead through another put back): a fixpoint
        changed, left = False, []
        for parts, target in pending:
            if tree.kind(parts[:-1]) != "dir" or tree.kind(parts) is not None:
                continue
            r = judge(parts, target)
            if given.get("/".join(parts)) == target or r.kind == "system":
                os.symlink(target, root.joinpath(*parts))
                counts["given"] += given.get("/".join(parts)) == target
            elif r.kind == "inside":
                os.symlink(relative_link(parts[:-1], r.path), root.joinpath(*parts))
                counts["restored"] += 1
            else:
                left.append((parts, target))
                continue
            changed = True
        pending = left
    for parts, target in pending:
        r = judge(parts, target)
        if r.kind in ("protected", "outside") or r.could_escape or r.could_protect:
            refused.append(("/".join(parts), target, r))
    links = [(parts, os.readlink(root.joinpath(*parts))) for parts in _links(root)]
    counts["links"] = len(links)
    # every link judged against the tree as it is, before any is removed or rewritten: the verdict
    # of one never depends on the order the others were met in (a removed dangling link would turn
    # a later link's path through it into a missing directory)
    judged = [(parts, target, judge(parts, target)) for parts, target in links
              if given.get("/".join(parts)) != target]
    for parts, target, r in judged:
        rel = "/".join(parts)
        if r.kind in ("protected", "outside") or (r.kind == "dangling" and (r.could_escape or r.could_protect)):
            refused.append((rel, target, r))
        elif r.kind in ("dangling", "loop"):
            root.joinpath(*parts).unlink()
            counts["removed"] += 1
        elif r.kind == "inside" and target.startswith("/"):
            root.joinpath(*parts).unlink()
            os.symlink(relative_link(parts[:-1], r.path), root.joinpath(*parts))
    if refused:
        refused.sort(key=lambda x: (x[2].reaches != "verifier_files", x[0]))
        path, target, r = refused[0]
        raise WorkspaceLinkRefused(path, target, r.reaches, len(refused) - 1)
    return counts


def _links(root: Path) -> list[Parts]:
    """Every symlink below `root` (parts), listed without following any."""
    out: list[Parts] = []
    stack: list[Parts] = [()]
    while stack:
        here = stack.pop()
        with os.scandir(root.joinpath(*here)) as entries:
            for e in entries:
                if e.is_symlink():
                    out.append((*here, e.name))
                elif e.is_dir(follow_symlinks=False):
                    stack.append((*here, e.name))
    return out


def given_links(sandbox: Sandbox) -> dict[str, str]:
    """The links of the task's own starting workspace (an image's files at the workspace path):
    the task's, not the agent's. {} for a sandbox without an image."""
    rootfs, mount = sandbox.config.rootfs, sandbox.config.workspace_mount
    if not rootfs or not mount:
        return {}
    return dict(_image_links(str(rootfs), str(mount)))


@functools.lru_cache(maxsize=32)
def _image_links(rootfs: str, mount: str) -> tuple[tuple[str, str], ...]:
    from harnessrl.sandbox.rootfs import resolve_in_root

    found = resolve_in_root(Path(rootfs), mount)
    if found is None or not found.is_dir():
        return ()
    base = Path(found)
    return tuple(sorted(("/".join(p), os.readlink(base.joinpath(*p))) for p in _links(base)
                        if stat.S_ISLNK(os.lstat(base.joinpath(*p)).st_mode)))
