"""`bwrap` backend: one bubblewrap sandbox per rollout, entered through its namespaces for each run().

Host user root: bwrap runs as ``cfg.host_uid`` (unprivileged, never 0), and so does every process
of the sandbox, so that none of them owns a host inode it can see (``/dev/null``, ``/proc/sys``);
bwrap itself starts with an empty environment.

Life cycle
- create (start-up helpers: bwrap_start): ``bwrap`` (all namespaces, mounts from bwrap_mounts) reports its pids, waits on
  ``--block-fd`` until both its processes are in the sandbox's cgroups, then starts the keeper
  (KEEPER: bash as the pid namespace's init, reading a pipe only this object holds, saying
  "ready" once the mounts are done).
  The namespaces are then held open as fds. The workspace (a size-limited tmpfs) is filled from
  ``workspace_src`` through ``/proc/<pid>/root`` before anything runs inside; with a proxy, a
  listening socket is made inside the sandbox's network namespace and relayed to the proxy
  (netbridge).
- run: ``entry_helper.py`` enters the sandbox's namespaces (bwrap_enter.py), drops every
  capability (bounding set included), sets no_new_privs and loads the default seccomp profile
  (sandbox/seccomp.py), then the command; the process joins its own ``run-<n>`` cgroup first, so a
  timeout kills its whole tree, daemons included. The keeper runs under the same filter and
  with no capabilities (``bwrap --cap-drop ALL --seccomp``).
- copy_out: this process reads the tree through the sandbox's root fd (snapshot.py), after
  killing what finished runs left running; nothing inside runs for it (an image's ``sh``/``tar``
  may be the agent's by then).
- destroy: SIGKILL the pid namespace's init (the kernel then kills every process of the
  namespace: double forks and setsid do not escape), kill and remove the cgroups, delete the
  host scratch dir. If the host process dies instead, the keeper's pipe closes and the keeper
  SIGKILLs every process of the namespace (``kill -KILL -1``) and exits, which ends the namespace;
  the dead host's cgroups are swept (killed, removed) by the next sandbox created on the machine. (``--die-with-parent`` is not used: it ties the sandbox to the
  *thread* that created it, which would kill sandboxes made in short-lived threads.)

Limits: ``memory_mb`` and ``max_procs`` through cgroups (v1 here; v2 where delegated). Without
writable cgroups the limits fall back to rlimits (RLIMIT_AS per process, and RLIMIT_NPROC, which
counts every process of the host uid) and a warning is logged. ``workspace_mb``/``scratch_mb``
are tmpfs sizes (writes past them fail with ENOSPC; tmpfs pages count towards memory_mb).
``wall_time_s`` is the default timeout of each run(). Each run also gets RLIMIT_FSIZE of
max(workspace_mb, scratch_mb, 1024) MiB (bounds a ``stdout_path`` file) and no core files; its
captured stdout/stderr are bounded in memory (process.py: head + tail), never a host file.
``/dev/shm`` is a tmpfs of ``shm_mb``; ``/dev`` is read-only. The proxy relay serves at most 64 connections per sandbox at once.
"""

from __future__ import annotations

import dataclasses
import fcntl
import logging
import os
import posixpath
import select
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from harnessrl.sandbox.base import (
    ProcessResult,
    ProxyEndpoint,
    Sandbox,
    SandboxClosed,
    SandboxConfig,
    SandboxError,
)
from harnessrl.sandbox import rootfs
from harnessrl.sandbox.bwrap_enter import NAMESPACES, NS_GET_PARENT, entry_argv, entry_wrapper
from harnessrl.sandbox.bwrap_mounts import SYSTEM_PATH, bwrap_argv, inner_path_env
from harnessrl.sandbox.bwrap_start import (  # noqa: F401 - STALE_PREFIX, _sweep_scratch_dirs: importable here too
    LISTEN_HELPER,
    SCRATCH_PREFIX,
    STALE_PREFIX,
    START_TIMEOUT_S,
    _json_or_none,
    _read_until,
    _require_tools,
    _start_error,
    _sweep_scratch_dirs,
    as_fs_user,
    fallback_rlimits,
    keeper_argv,
    seccomp_filter,
    stage_argv,
    sweep_scratch_dirs,
)
from harnessrl.sandbox.cgroups import SandboxCgroups
from harnessrl.sandbox.netbridge import ProxyBridge, listen_in_netns
from harnessrl.sandbox.process import base_env, kill_process_group, run_to_completion
from harnessrl.sandbox.snapshot import write_archive
from harnessrl.sandbox.tarcopy import COPY_IN, archive_cap_mb, check_archive, pack, unpack_archive
from harnessrl.sandbox.treeops import TreeBudget, TreeLimits, WorkspaceLimitExceeded, copy_tree, remove_tree

log = logging.getLogger(__name__)


def with_pwd(workdir: str, argv: list[str]) -> list[str]:
    """argv run with PWD naming its working dir inside the sandbox. `env -C` changes the directory
    but keeps the PWD the launcher's shell exported (the host's sandbox root): a program started
    without a shell (node, python) would read a host path, and one that differs between two runs of
    the same task."""
    return argv if "=" in argv[0] else ["env", f"PWD={workdir}", *argv]


class BwrapSandbox(Sandbox):
    read_only_binds = True

    def __init__(self, cfg: SandboxConfig, root: Path, cgroups: SandboxCgroups | None) -> None:
        self.config = cfg
        self.inner_workspace = cfg.workspace_mount
        self.proxy_base: str | None = None
        self._root = root
        self._cgroups = cgroups
        self._rlimits = [] if cgroups else fallback_rlimits(cfg)
        # largest file a run may write: bounds the host-side capture of its stdout/stderr too
        self._fsize_mb = max(cfg.workspace_mb, cfg.scratch_mb, 1024)
        self._lock = threading.Lock()
        # what the host handles of this workspace (copy-out, the verifier's copy): bytes up to its tmpfs size
        self.tree_limits = TreeLimits.for_workspace(cfg.workspace_mb)
        self.workspace_fault: WorkspaceLimitExceeded | None = None  # set when the workspace passed a limit
        self._runs = 0
        self._closed = False
        self._bridge: ProxyBridge | None = None
        self._proc: subprocess.Popen | None = None
        self._keeper_w = -1
        self._active_runs = 0
        self._busy_leaves: set[str] = set()  # cgroup leaves of the runs in progress
        self._ns_pid = -1
        self._pidfd = -1
        self._ns_fds: dict[str, int] = {}  # held open: run() enters through these, never by pid
        self._seccomp: Path | None = seccomp_filter(cfg)
        # As root, bwrap (and so every process of the sandbox) runs as cfg.host_uid: bwrap would
        # otherwise map the sandbox user to host root, the owner of /dev/null and /proc/sys.
        self._host_uid: int | None = cfg.host_uid if os.geteuid() == 0 else None  # and gid
        user = "root" if cfg.uid == 0 else "sandbox"
        self._env = base_env(cfg, home=cfg.home, tmp="/tmp", path=inner_path_env(cfg))
        self._env.update({"USER": user, "LOGNAME": user, "SHELL": "/bin/bash"})
        self._env.update(cfg.env)

    @classmethod
    def create(
        cls, cfg: SandboxConfig, *, workspace_src: Path | None, proxy: ProxyEndpoint | None
    ) -> BwrapSandbox:
        _require_tools()
        sweep_scratch_dirs(Path(tempfile.gettempdir()))
        root = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-"))
        sb = cls(cfg, root, SandboxCgroups.create(cfg.memory_mb, cfg.max_procs))
        try:
            sb._start()
            if workspace_src is not None:
                sb._fill_workspace(workspace_src)
            if proxy is not None:
                sb._bridge = ProxyBridge(sb._proxy_listener(proxy.port), proxy)
                sb.proxy_base = f"http://127.0.0.1:{proxy.port}"
        except BaseException:
            sb.destroy()
            raise
        return sb

    def _start(self) -> None:
        keeper_r, self._keeper_w = os.pipe()
        info_r, info_w = os.pipe()
        block_r, block_w = os.pipe()
        ready_r, ready_w = os.pipe()
        # The keeper says "ready" when it runs, i.e. after bwrap finished the mounts (info-fd
        # comes earlier: entering then would land in the host's root). When the keeper pipe
        # closes (this process died) it SIGKILLs every process of the sandbox: bwrap's init
        # only exits once it has no children left, so daemons would keep it alive otherwise.
        keeper, as_pid_1 = keeper_argv(self.config.rootfs)
        seccomp_fd = os.open(self._seccomp, os.O_RDONLY) if self._seccomp is not None else -1
        staged, argv = stage_argv(self.config, self._root, self._host_uid)
        argv += ["prlimit", *self._rlimits, "--"] if self._rlimits else []
        argv += bwrap_argv(self.config, info_fd=info_w, block_fd=block_r, init=keeper, as_pid_1=as_pid_1,
                           seccomp_fd=seccomp_fd if seccomp_fd >= 0 else None, staged=staged)
        err_path = self._root / "bwrap.stderr"
        try:
            with open(err_path, "wb") as err:
                self._proc = subprocess.Popen(
                    argv,
                    stdin=keeper_r,
                    stdout=ready_w,
                    stderr=err,
                    pass_fds=(info_w, block_r) + ((seccomp_fd,) if seccomp_fd >= 0 else ()),
                    start_new_session=True,
                    env={"PATH": SYSTEM_PATH},  # bwrap itself (/proc/1/environ inside): nothing of the host
                )
            for fd in (info_w, block_r, ready_w, keeper_r, seccomp_fd):
                if fd >= 0:
                    os.close(fd)
            info_w = block_r = ready_w = keeper_r = seccomp_fd = -1
            try:
                info = _read_until(info_r, _json_or_none, START_TIMEOUT_S)
                self._ns_pid = int(info["child-pid"])
                if self._cgroups is not None:  # both bwrap processes join before anything forks
                    self._cgroups.add_pids("init", [self._proc.pid, self._ns_pid])
                os.write(block_w, b"x")
                _read_until(ready_r, lambda d: True if b"ready" in d else None, START_TIMEOUT_S)
            except (SandboxError, OSError) as e:
                kill_process_group(self._proc)
                self._proc.wait(timeout=5)
                raise _start_error(err_path.read_text(errors="replace").strip() or str(e)) from None
        finally:
            for fd in (keeper_r, info_r, info_w, block_r, block_w, ready_r, ready_w, seccomp_fd):
                if fd >= 0:
                    os.close(fd)
        self._pidfd = os.pidfd_open(self._ns_pid)
        for ns in NAMESPACES:
            self._ns_fds[ns] = os.open(f"/proc/{self._ns_pid}/ns/{ns}", os.O_RDONLY | os.O_CLOEXEC)
        self._ns_fds["root"] = os.open(
            f"/proc/{self._ns_pid}/root", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
        )
        try:  # bwrap nests a user namespace in its own when the sandbox uid is not 0 (see bwrap_enter)
            parent = fcntl.ioctl(self._ns_fds["user"], NS_GET_PARENT)
        except OSError:
            parent = -1
        if parent >= 0:
            if os.fstat(parent).st_ino != os.stat("/proc/self/ns/user").st_ino:
                self._ns_fds["outer_user"] = parent
            else:
                os.close(parent)
        if select.select([self._pidfd], [], [], 0)[0] or self._proc.poll() is not None:
            raise SandboxError("the sandbox exited during start")

    def _proxy_listener(self, port: int) -> socket.socket:
        """A socket listening on the sandbox's 127.0.0.1:port, held by this process."""
        try:
            return listen_in_netns(self._ns_fds["net"], port)
        except SandboxError as first:  # not root: let a helper inside make it and hand it over
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            with ours, theirs:
                python = "python3" if self.config.python else "/usr/bin/python3"
                res = self._run_tracked(
                    [python, "-I", "-c", LISTEN_HELPER, str(port), str(theirs.fileno())],
                    timeout_s=START_TIMEOUT_S,
                    extra_fds=(theirs.fileno(),),
                )
                theirs.close()
                ours.settimeout(START_TIMEOUT_S)
                try:
                    _, fds, _, _ = socket.recv_fds(ours, 16, 1)
                except OSError:
                    fds = []
            if not res.ok or not fds:
                raise SandboxError(f"{first}; the in-sandbox helper failed too: {res.stderr.strip()[-300:]}")
            return socket.socket(fileno=fds[0])

    def _fill_workspace(self, src: Path) -> None:
        """Copy the task files in from the host before anything runs inside (no races). As root
        the copy runs with the sandbox user's fsuid: the workspace tmpfs belongs to the sandbox's
        user namespace, where host root has no uid (and the files must be the sandbox user's)."""

        def copy() -> None:
            copy_tree(src, self.workspace, self.tree_limits)

        try:
            if self._host_uid is not None:
                as_fs_user(self._host_uid, self._host_uid, copy)
            else:
                copy()
        except WorkspaceLimitExceeded:
            raise
        except OSError as e:  # HostCopyFailed included: the host's problem
            raise SandboxError(f"copying {src} into the workspace failed: {e}") from None

    @property
    def workspace(self) -> Path:
        return Path(f"/proc/{self._ns_pid}/root{self.inner_workspace}")

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
        return self._run_tracked(
            argv,
            env=env,
            cwd=cwd,
            timeout_s=timeout_s,
            stdin=stdin,
            stdout_path=stdout_path,
            keep_background=keep_background,
        )

    @property
    def alive(self) -> bool:
        """False once destroyed, or when the sandbox died (e.g. its keeper was killed from inside)."""
        return not self._closed and not select.select([self._pidfd], [], [], 0)[0]

    def _run_tracked(self, argv: list[str], **kw: Any) -> ProcessResult:
        if not argv:
            raise SandboxError("run() needs a non-empty argv")
        with self._lock:
            self._check_open()
            if not self.alive:
                return ProcessResult(
                    -9, "", "sandbox is gone: its init exited (killed from inside?)\n", False, 0.0
                )
            self._runs += 1
            self._active_runs += 1
            leaf = f"run-{self._runs}"
            self._busy_leaves.add(leaf)
        try:
            return self._run(argv, leaf, **kw)
        finally:
            with self._lock:
                self._active_runs -= 1
                self._busy_leaves.discard(leaf)
                release = self._closed and self._active_runs == 0
            if release:
                self._close_ns_fds()

    def _run(
        self,
        argv: list[str],
        leaf: str,
        *,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        timeout_s: float | None = None,
        stdin: bytes | str | None = None,
        stdout_path: Path | None = None,
        keep_background: bool = False,
        extra_fds: tuple[int, ...] = (),
        fsize_mb: int | None = None,
    ) -> ProcessResult:
        workdir = self.inner_path(cwd) if cwd else self.inner_workspace
        fds = self._ns_fds
        # enter through the held namespace fds (a pid could be reused after destroy); the
        # directory is changed inside (env -C), after the root changed
        enter = entry_argv(fds, seccomp_bpf=self._seccomp, host_uid=self._host_uid)
        cgroups = self._cgroups
        join = cgroups.join_files(leaf) if cgroups else []

        def kill_tree(proc: subprocess.Popen) -> None:
            if cgroups is not None:
                cgroups.kill_leaf(leaf)
            kill_process_group(proc)

        def end_leftovers(proc: subprocess.Popen) -> None:  # what the command left running goes too
            if cgroups is not None:
                cgroups.kill_leaf(leaf)
            else:
                kill_process_group(proc)

        before = cgroups.limit_events(leaf) if cgroups else {}
        try:
            result = run_to_completion(
                entry_wrapper(join, self._rlimits, fsize_mb or self._fsize_mb)
                + enter
                + rootfs.enter_dir_argv(self.config, workdir, argv if self.config.rootfs else with_pwd(workdir, argv)),
                env={**self._env, **(env or {})},
                cwd=str(self._root),
                timeout_s=timeout_s if timeout_s is not None else self.config.wall_time_s,
                stdin=stdin,
                stdout_path=stdout_path,
                max_output_bytes=self.config.max_output_bytes,
                tmp_dir=str(self._root),
                kill_tree=kill_tree,
                pass_fds=(*fds.values(), *extra_fds),
                after_exit=None if keep_background else end_leftovers,
            )
            return self._note_limits(result, before, leaf)
        finally:
            if cgroups is not None:
                cgroups.remove_leaf(leaf)

    def _note_limits(self, result: ProcessResult, before: dict[str, int], leaf: str) -> ProcessResult:
        if self._cgroups is None:
            return result
        after = self._cgroups.limit_events(leaf)
        hit = tuple(k for k in ("memory", "procs") if after.get(k, 0) > before.get(k, 0))
        if not hit:
            return result
        cfg = self.config
        notes = {
            "memory": f"memory limit ({cfg.memory_mb} MiB): the OOM killer killed a process",
            "procs": f"process limit ({cfg.max_procs}): a fork was refused",
        }
        stderr = result.stderr + "".join(f"[harnessrl sandbox] {notes[k]}\n" for k in hit)
        return dataclasses.replace(result, stderr=stderr, limits_hit=hit)

    def copy_in(self, host_src: Path | str, inner_dest: str) -> None:
        src, dest = Path(host_src), self.inner_path(inner_dest)
        if not (src.exists() or src.is_symlink()):
            raise SandboxError(f"copy_in: {src} does not exist")
        with tempfile.TemporaryFile(dir=self._root) as tf:
            target = pack(src, dest, tf)
            res = self.run(["sh", "-c", COPY_IN, "sh", target], stdin=tf, timeout_s=300)  # type: ignore[arg-type]
        if not res.ok:
            raise SandboxError(f"copy_in {src} -> {dest} failed: {res.stderr.strip()}")

    def copy_out(self, inner_src: str, host_dest: Path | str) -> None:
        """The tree or file at `inner_src` into `host_dest`, within ``self.tree_limits``:
        WorkspaceLimitExceeded (also kept as ``workspace_fault``) past one, SandboxError when the
        tar inside fails, HostCopyFailed (no SandboxError) when the host's own disk fails."""
        budget = TreeBudget(self.tree_limits)
        tmp = Path(tempfile.mkdtemp(prefix="out-", dir=self._root))
        try:
            self._copy_out(self.inner_path(inner_src), Path(host_dest), tmp, budget)
        except WorkspaceLimitExceeded as e:
            self.workspace_fault = e
            raise
        finally:
            why = remove_tree(tmp)
            if why:
                log.warning("copy_out left %s", why)

    def _copy_out(self, src: str, dest: Path, tmp: Path, budget: TreeBudget) -> None:
        """This process archives the tree itself (snapshot.py): nothing inside runs for a copy-out,
        so a program the agent planted (an image's /bin/sh or tar) never runs after its harness."""
        tar_path, cap_mb = tmp / "out.tar", archive_cap_mb(budget)
        with self._lock:
            self._check_open()
            root_fd = os.dup(self._ns_fds["root"])
        try:
            self.end_runs(max(0.1, budget.deadline - time.monotonic()))
            with open(tar_path, "wb") as out:
                write_archive(root_fd, src, out, TreeBudget(budget.limits, deadline=budget.deadline))
        finally:
            os.close(root_fd)
        check_archive(tar_path, cap_mb)
        unpack_archive(tar_path, tmp / "x", dest, posixpath.basename(src), budget)

    def end_runs(self, timeout_s: float) -> None:
        """Kill every process left by a finished run (``keep_background`` daemons), so a copy-out is
        a snapshot no process of the rollout still writes to; runs in progress are left alone.
        WorkspaceLimitExceeded("time") when they are not all gone within ``timeout_s``. Without
        cgroups each run's process group was killed when it ended (``local``-like, weaker)."""
        if self._cgroups is None:
            return
        with self._lock:
            busy = set(self._busy_leaves)
        rounds = max(1, int(timeout_s / 0.002))
        for leaf in sorted(p.name for p in self._cgroups.pids_dir.glob("run-*")):
            if leaf not in busy and not self._cgroups.kill_leaf(leaf, rounds):
                raise WorkspaceLimitExceeded("time", f"processes of {leaf} still ran {timeout_s:.0f} s "
                                             "after they were killed: no snapshot")

    def destroy(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            release = self._active_runs == 0
        if self._bridge is not None:
            self._bridge.close()
        if self._pidfd >= 0:
            try:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.close(self._pidfd)
        if self._keeper_w >= 0:
            os.close(self._keeper_w)
        if self._proc is not None:  # bwrap exits as soon as the namespace's init is gone
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                kill_process_group(self._proc)
                self._proc.wait()
        if self._cgroups is not None:  # the sweep: anything left in the cgroups is killed
            self._cgroups.remove()
        if release:
            self._close_ns_fds()
        why = remove_tree(self._root)
        if why:  # the next sweep on this host retries it (and skips it for good if it cannot)
            log.warning("sandbox scratch dir not removed: %s", why)

    def _close_ns_fds(self) -> None:
        with self._lock:
            fds, self._ns_fds = self._ns_fds, {}
        for fd in fds.values():
            os.close(fd)
