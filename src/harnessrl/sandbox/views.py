"""A fresh sandbox holding a copy of another one's workspace: where a verifier runs.

    with fresh_view(agent_sandbox, exclude=[".verifier"], ro_dirs={"/workspace/.verifier": host_dir}) as v:
        v.run(["python3", ".verifier/verify.py"])

The copy goes through ``copy_out`` (tar inside, as the sandbox user; on the host only members
that stay inside are kept, sandbox/tarcopy.py), so nothing of the first sandbox (its processes,
HOME, /tmp, links that leave the workspace) reaches the new one but the workspace's files.

The view's /proc is read-only (``SandboxConfig.read_only_proc``): code the verifier runs on purpose
(the agent's module, its tests) cannot write into another process through ``/proc/<pid>/mem``,
even one that is dumpable (a ``bash reward.sh``). The seccomp profile denies the ptrace family in
every sandbox; the step checker adds its own layers (docs/security.md, "The verifier and the code
it runs").
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath

from harnessrl.sandbox.base import Sandbox, SandboxError, WorkspaceLost
from harnessrl.sandbox.factory import make_sandbox


def fresh_view(sandbox: Sandbox, *, exclude: Sequence[str] = (),
               ro_dirs: Mapping[str, Path] | None = None, read_only_proc: bool = True,
               timings: dict[str, float] | None = None) -> Sandbox:
    """A NEW sandbox of `sandbox`'s config (no proxy) whose workspace is a copy of its workspace.

    ``exclude``: workspace-relative paths left out of the copy (a link on the way is removed
    itself, never followed). ``ro_dirs``: inner path -> host directory, shown read-only where the
    backend binds (bwrap), copied in otherwise. ``read_only_proc``: the view's /proc read-only
    (bwrap; False only to measure what it costs). WorkspaceLost when the workspace cannot be copied
    out (the sandbox died), SandboxError when the new sandbox cannot start. ``timings``: filled
    with the seconds of the copy-out (``copy_out_s``) and of the new sandbox's start (``sandbox_s``).
    """
    ro = dict(ro_dirs or {})
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="harnessrl-view-") as tmp:
        copy = Path(tmp) / "workspace"
        copy.mkdir()
        try:
            if not sandbox.alive:
                raise SandboxError("the sandbox is gone (its keeper was killed?)")
            sandbox.copy_out(sandbox.inner_workspace, copy)
        except SandboxError as e:
            raise WorkspaceLost(f"the workspace could not be copied out: {e}") from None
        for rel in exclude:
            remove_inside(copy, rel)
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
