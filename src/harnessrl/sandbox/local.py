"""`local` backend: plain subprocesses in a temporary directory. It does NOT isolate.

For development and machines without bubblewrap. What it does: a fresh temp workspace, a private
HOME and TMPDIR, a clean environment, timeouts that kill the process group, and destroy() that
kills the process groups of its runs and deletes the directory. What it does not do: hide the
host file system or network, enforce memory/process/size limits or the proxy key (the proxy is
reached directly at its host address), or present the workspace at ``cfg.workspace_mount``.
A warning says so once per process.

Fixed paths. Where ``unshare`` can make a private mount namespace (root, or unprivileged user
namespaces), every run sees ITS sandbox's workspace, HOME and TMPDIR at the same fixed paths,
``<tmp>/harnessrl-local/{workspace,home,tmp}`` (bind mounts visible only to that run's
processes; the host directories stay empty mount points). Paths in prompts (cwd, HOME) are then
identical across rollouts, so the prefix tree shares them as with bwrap. As root the mount
namespace is all that changes; otherwise a user namespace maps the user to root for the mounts
and a nested one maps it back, so the command runs under its own uid. Where neither works the
paths are the per-sandbox temp directories (``fixed_paths`` False) and prompts differ per rollout.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

from harnessrl.sandbox.base import (
    ProcessResult,
    ProxyEndpoint,
    Sandbox,
    SandboxClosed,
    SandboxConfig,
    SandboxError,
)
from harnessrl.sandbox.process import base_env, run_to_completion
from harnessrl.sandbox.treeops import TreeLimits, WorkspaceLimitExceeded, copy_tree, remove_tree


class SandboxNotIsolatedWarning(UserWarning):
    """Emitted (once per process, by the warnings filter) when the local backend is used."""


FIXED_DIRS = ("workspace", "home", "tmp")
# sh -c BIND ROOT FIXED WORKDIR [NESTED...] -- argv: bind ROOT/{workspace,home,tmp} over
# FIXED/..., cd to WORKDIR, then exec NESTED... argv (NESTED maps the uid back, or is empty)
BIND = (
    'root=$1 fixed=$2 wd=$3; shift 3; '
    'for d in workspace home tmp; do mount --bind "$root/$d" "$fixed/$d" || exit 125; done; '
    'cd "$wd" || exit 125; exec "$@"'
)


def fixed_base() -> Path:
    return Path(tempfile.gettempdir()) / "harnessrl-local"


def private_mounts_argv() -> list[str] | None:
    """The unshare prefix that gives a run a private mount namespace here, or None."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return None
    if os.geteuid() == 0:
        outer = ["unshare", "--mount", "--propagation", "private", "--"]
    else:
        outer = ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private", "--"]
    base = fixed_base()
    try:
        for d in FIXED_DIRS:
            (base / d).mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    probe = subprocess.run(outer + ["mount", "--bind", str(base / "tmp"), str(base / "home")],
                           capture_output=True, timeout=30, check=False)
    return outer if probe.returncode == 0 else None


def copy_tree_or_file(src: Path, dest: Path, limits: TreeLimits | None = None) -> None:
    """Copy a file to the path ``dest`` or a directory's contents into ``dest`` (links, hard links
    and holes kept), iteratively within `limits` (treeops.py: WorkspaceLimitExceeded past one)."""
    if not (src.exists() or src.is_symlink()):
        raise SandboxError(f"copy source {src} does not exist")
    if not (src.is_dir() and not src.is_symlink()):
        dest.parent.mkdir(parents=True, exist_ok=True)
    copy_tree(src, dest, limits)


STOP_GRACE_S = 3.0  # a harness launcher ends its own process tree on SIGTERM (harness/launcher.py)


def _signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` to a process group; False when the group is gone."""
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def end_groups(pgids: set[int], grace_s: float) -> None:
    """SIGTERM the live groups (a launcher then ends its harness, which runs in a session of its own
    and would outlive a plain SIGKILL of the group), then SIGKILL whatever is left after `grace_s`."""
    live = [g for g in pgids if _signal_group(g, signal.SIGTERM)]
    deadline = time.monotonic() + grace_s
    while live and time.monotonic() < deadline:
        time.sleep(0.05)
        live = [g for g in live if _signal_group(g, 0)]
    for g in live:
        _signal_group(g, signal.SIGKILL)


class LocalSandbox(Sandbox):
    def __init__(
        self, cfg: SandboxConfig, root: Path, proxy: ProxyEndpoint | None, unshare: list[str] | None = None
    ) -> None:
        self.config = cfg
        self._root = root
        self._ws = root / "workspace"
        self._unshare = unshare
        self.fixed_paths = unshare is not None
        self._inner_root = fixed_base() if self.fixed_paths else root
        self.inner_workspace = str(self._inner_root / "workspace")
        self.proxy_base = f"http://{proxy.host}:{proxy.port}" if proxy else None
        self._lock = threading.Lock()
        self.tree_limits = TreeLimits.for_workspace(cfg.workspace_mb)  # what copy_out handles (treeops.py)
        self.workspace_fault: WorkspaceLimitExceeded | None = None  # set when the workspace passed a limit
        self._pgids: set[int] = set()
        self._closed = False
        host_path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", os.defpath)])
        inner = self._inner_root
        self._env = base_env(cfg, home=str(inner / "home"), tmp=str(inner / "tmp"), path=host_path)

    @classmethod
    def create(
        cls, cfg: SandboxConfig, *, workspace_src: Path | None, proxy: ProxyEndpoint | None
    ) -> LocalSandbox:
        warnings.warn(
            "sandbox type 'local' does NOT isolate: the harness can read and write the host and "
            "reach the network. Use type='bwrap' for real rollouts.",
            SandboxNotIsolatedWarning,
            stacklevel=3,
        )
        root = Path(tempfile.mkdtemp(prefix="harnessrl-local-"))
        for sub in ("workspace", "home", "tmp"):
            (root / sub).mkdir()
        if workspace_src is not None:
            copy_tree_or_file(workspace_src, root / "workspace", TreeLimits.for_workspace(cfg.workspace_mb))
        return cls(cfg, root, proxy, private_mounts_argv())

    @property
    def workspace(self) -> Path:
        return self._ws

    @property
    def alive(self) -> bool:
        return not self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxClosed("sandbox already destroyed")

    def run(
        self,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        timeout_s: float | None = None,
        stdin: bytes | str | None = None,
        stdout_path: Path | None = None,
        keep_background: bool = False,
    ) -> ProcessResult:
        self._check_open()
        if not argv:
            raise SandboxError("run() needs a non-empty argv")
        full_env = {**self._env, **(env or {})}
        pgids = self._pgids

        def kill(proc: subprocess.Popen[bytes]) -> None:  # the group of this run only
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        workdir = self.inner_path(cwd) if cwd else self.inner_workspace
        cmd, host_cwd = list(argv), self._host_path(workdir)
        if self._unshare is not None:
            nested = [] if os.geteuid() == 0 else [
                "unshare", "--user", f"--map-user={os.geteuid()}", f"--map-group={os.getegid()}", "--"]
            cmd = [*self._unshare, "sh", "-c", BIND, "sh", str(self._root), str(self._inner_root), workdir,
                   *nested, *cmd]
        def on_start(proc: subprocess.Popen[bytes]) -> None:
            pgids.add(proc.pid)

        try:
            result = run_to_completion(
                cmd,
                env=full_env,
                cwd=host_cwd,
                timeout_s=timeout_s if timeout_s is not None else self.config.wall_time_s,
                stdin=stdin,
                stdout_path=stdout_path,
                max_output_bytes=self.config.max_output_bytes,
                tmp_dir=str(self._root),
                kill_tree=kill,
                on_start=on_start,
                after_exit=None if keep_background else kill,  # best effort: its process group only
            )
        except FileNotFoundError as e:
            return ProcessResult(127, "", f"{e}\n", False, 0.0)
        return result

    def _host_path(self, inner: str) -> str:
        """Where an inner path lies on the host (the fixed paths are this sandbox's dirs)."""
        p = Path(inner)
        if self.fixed_paths and p.is_relative_to(self._inner_root):
            return str(self._root / p.relative_to(self._inner_root))
        return inner

    def copy_in(self, host_src: Path | str, inner_dest: str) -> None:
        self._check_open()
        copy_tree_or_file(Path(host_src), Path(self._host_path(self.inner_path(inner_dest))))

    def copy_out(self, inner_src: str, host_dest: Path | str) -> None:
        self._check_open()
        try:
            copy_tree_or_file(Path(self._host_path(self.inner_path(inner_src))), Path(host_dest), self.tree_limits)
        except WorkspaceLimitExceeded as e:
            self.workspace_fault = e
            raise

    def destroy(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        end_groups(self._pgids, grace_s=STOP_GRACE_S)
        why = remove_tree(self._root)
        if why:
            warnings.warn(f"local sandbox dir not removed: {why}", RuntimeWarning, stacklevel=2)
