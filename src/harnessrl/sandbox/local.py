"""`local` backend: plain subprocesses in a temporary directory. It does NOT isolate.

For development and machines without bubblewrap. What it does: a fresh temp workspace, a private
HOME and TMPDIR, a clean environment, timeouts that kill the process group, and destroy() that
kills the process groups of its runs and deletes the directory. What it does not do: hide the
host file system or network, enforce memory/process/size limits, or present the workspace at
``cfg.workspace_mount`` (processes see the host path, ``inner_workspace``). The proxy is reached
directly at its host address. A warning says so once per process.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import threading
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


class SandboxNotIsolatedWarning(UserWarning):
    """Emitted (once per process, by the warnings filter) when the local backend is used."""


def copy_tree_or_file(src: Path, dest: Path) -> None:
    """Copy a file to the path ``dest`` or a directory's contents into ``dest`` (links kept)."""
    if src.is_dir() and not src.is_symlink():
        shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)
    elif src.exists() or src.is_symlink():
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest, follow_symlinks=False)
    else:
        raise SandboxError(f"copy source {src} does not exist")


class LocalSandbox(Sandbox):
    def __init__(self, cfg: SandboxConfig, root: Path, proxy: ProxyEndpoint | None) -> None:
        self.config = cfg
        self._root = root
        self._ws = root / "workspace"
        self.inner_workspace = str(self._ws)
        self.proxy_base = f"http://{proxy.host}:{proxy.port}" if proxy else None
        self._lock = threading.Lock()
        self._pgids: set[int] = set()
        self._closed = False
        host_path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", os.defpath)])
        self._env = base_env(cfg, home=str(root / "home"), tmp=str(root / "tmp"), path=host_path)

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
            copy_tree_or_file(workspace_src, root / "workspace")
        return cls(cfg, root, proxy)

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

        def kill(proc) -> None:  # the group of this run only
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        workdir = self.inner_path(cwd) if cwd else self.inner_workspace
        started: list = []
        try:
            result = run_to_completion(
                list(argv),
                env=full_env,
                cwd=workdir,
                timeout_s=timeout_s if timeout_s is not None else self.config.wall_time_s,
                stdin=stdin,
                stdout_path=stdout_path,
                max_output_bytes=self.config.max_output_bytes,
                tmp_dir=str(self._root),
                kill_tree=kill,
                on_start=lambda proc: (pgids.add(proc.pid), started.append(proc)),
            )
        except FileNotFoundError as e:
            return ProcessResult(127, "", f"{e}\n", False, 0.0)
        if not keep_background and started:  # best effort: its process group only
            kill(started[0])
        return result

    def copy_in(self, host_src: Path | str, inner_dest: str) -> None:
        self._check_open()
        copy_tree_or_file(Path(host_src), Path(self.inner_path(inner_dest)))

    def copy_out(self, inner_src: str, host_dest: Path | str) -> None:
        self._check_open()
        copy_tree_or_file(Path(self.inner_path(inner_src)), Path(host_dest))

    def destroy(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for pgid in self._pgids:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        shutil.rmtree(self._root, ignore_errors=True)
