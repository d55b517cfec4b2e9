"""The sandbox interface: one rollout's isolated place to run a harness and its verifier.

Usage (the rollout runner's view)::

    cfg = SandboxConfig(type="bwrap", workspace_mount="/root/.openclaw/workspace", home="/root")
    with make_sandbox(cfg, workspace_src=task_dir / "input_files",
                      proxy=ProxyEndpoint(port=proxy_port, key=key)) as sb:
        env = {"OPENAI_BASE_URL": f"{sb.proxy_base}/r/{key}/v1"}
        res = sb.run(["python", "agent.py"], env=env, timeout_s=600)   # -> ProcessResult
        sb.copy_in(task_dir / "reward", "reward")                         # after the agent
        verdict = sb.run(["bash", "reward/reward.sh"], timeout_s=120)
        sb.copy_out("report.md", run_dir / "report.md")
    # leaving the block destroys it: no process of the rollout survives

Contract
- ``make_sandbox(cfg, *, workspace_src=None, proxy=None) -> Sandbox`` creates and starts one
  sandbox. ``workspace_src`` (a host directory) is copied into the fresh workspace.
- ``Sandbox.inner_workspace``: the workspace path as processes inside see it (cwd default).
  ``Sandbox.workspace``: a host path to the same files, valid until ``destroy`` (for bwrap it
  is ``/proc/<pid>/root/<inner>``): read it for debugging, but move files with
  ``copy_in``/``copy_out``, which never follow links planted by the harness.
- ``Sandbox.proxy_base``: ``http://127.0.0.1:<proxy.port>`` — inside the sandbox the proxy
  answers on the SAME port as on the host (bwrap bridges it into the private network
  namespace); ``None`` without a proxy.
- ``run(argv, *, env=None, cwd=None, timeout_s=None, stdin=None, stdout_path=None,
  keep_background=False)`` blocks and returns ``ProcessResult``. ``timeout_s`` defaults to
  ``cfg.wall_time_s``; on timeout the whole process tree of this call is killed
  (``timed_out=True``). ``cwd`` relative paths are
  relative to the workspace. ``env`` is added to the sandbox's base env (PATH, HOME, TMPDIR,
  LANG, ``cfg.env``, ``cfg.env_passthrough``); the host environment is not inherited.
  ``stdout_path`` streams stdout to a host file instead of capturing it. Captured output keeps
  the first 64 KiB and the last ``cfg.max_output_bytes`` bytes of each stream; what was dropped
  between them is noted in the text and counted in ``output_dropped`` (nothing of it reaches the
  host's disk). When the command exits, processes it left running
  (background jobs, daemons) are killed too, so nothing of the harness touches the workspace
  while the verifier runs; ``keep_background=True`` lets them live until ``destroy`` (bwrap kills
  the call's whole cgroup, daemons included; local only its process group).
  ``limits_hit`` names the sandbox limits that bit while the call ran ("memory": the OOM killer
  killed a process, "procs": a fork was refused; also noted on stderr). Calls that overlap in
  one sandbox share these counters.
- ``copy_in(host_src, inner_dest)`` / ``copy_out(inner_src, host_dest)``: a file to a file
  path, a directory's contents to a directory. Inner paths are relative to the workspace or
  absolute inside the sandbox.
- ``alive``: False after destroy or when the sandbox died (a run then returns a failed result).
- ``destroy()`` is idempotent; the sandbox is a context manager. One sandbox per thread or many
  threads per sandbox both work (``run`` calls may overlap).

Errors: ``SandboxError`` (a failed operation), ``SandboxUnavailable`` (the backend cannot run
on this machine; the message says why and what to do), ``SandboxClosed`` (used after destroy).
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from typing_extensions import Self

from harnessrl.errors import HarnessRLError


class SandboxError(HarnessRLError, RuntimeError):
    """A sandbox operation failed (start, copy, bridge)."""


class SandboxUnavailable(SandboxError):
    """The chosen backend cannot run here; the message says why and what to do instead."""


class SandboxClosed(SandboxError):
    """The sandbox was already destroyed."""


class WorkspaceLost(SandboxError):
    """The workspace could not be copied out: the sandbox died (killed from inside?) or its copy
    failed. Whoever ran in the sandbox caused it, not the host."""


@dataclass(frozen=True)
class ProxyEndpoint:
    """Where the rollout's proxy listens on the host (the proxy server binds 127.0.0.1).

    ``key``: the rollout key the sandbox may use. With a key, the bwrap relay forwards only
    requests under ``/r/<key>/`` and answers every other request itself with a typed 403
    (sandbox/relay.py). ``None`` relays raw TCP to any path: only for endpoints that are not a
    harnessrl proxy shared by several rollouts (tests, a private server per sandbox).
    """

    port: int
    host: str = "127.0.0.1"
    key: str | None = None


@dataclass(frozen=True)
class ProcessResult:
    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float
    limits_hit: tuple[str, ...] = ()  # bwrap with cgroups: "memory" (OOM kill), "procs" (fork refused)
    output_dropped: int = 0  # bytes of stdout + stderr dropped from the middle (sandbox/process.py)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


class SandboxConfig(BaseModel):
    """One config for every backend; fields a backend cannot honour are documented there."""

    model_config = ConfigDict(extra="forbid")

    type: Literal["bwrap", "local"] = "bwrap"
    wall_time_s: float = Field(1800.0, gt=0, description="default timeout of each run()")
    # 1536: the shipped configs' 8-12 sandboxes fit a 24 GiB host; a harness that needs more raises it
    # for its own rollouts (HarnessAdapter.memory_floor_mb: OpenClaw 2048, its gateway mode 3072);
    # memory_mb x loop.concurrency over the host's memory lowers the concurrency (sandbox/health.py)
    memory_mb: int | None = Field(1536, gt=0, description="memory of all processes (cgroup)")
    max_procs: int | None = Field(512, gt=0, description="processes/threads at once (cgroup pids)")
    workspace_mb: int = Field(1024, gt=0, description="size of the workspace (tmpfs)")
    scratch_mb: int = Field(1024, gt=0, description="size of /tmp and of HOME, each (tmpfs)")
    shm_mb: int = Field(64, gt=0, description="bwrap: size of /dev/shm (tmpfs; /dev itself is read-only)")
    workspace_mount: str = "/workspace"
    home: str = "/home/sandbox"
    uid: int = Field(1000, ge=0, description="uid (and gid) inside; 0 gives a root-like user")
    host_uid: int = Field(
        65534, gt=0, description="bwrap, when harnessrl runs as root: the unprivileged host uid (and gid) "
        "the sandbox user is on the host (never 0: no host inode the sandbox sees is then its own)"
    )
    python: bool = Field(True, description="make this interpreter (venv + base) visible, read-only")
    extra_ro_binds: list[str] = Field(
        default_factory=list, description="host paths shown read-only: 'PATH' or 'HOSTPATH:INNERPATH'"
    )
    env: dict[str, str] = Field(default_factory=dict)
    env_passthrough: list[str] = Field(default_factory=list, description="host env names to copy in")
    max_output_bytes: int = Field(8 << 20, gt=0)
    seccomp: bool = Field(True, description="bwrap: the default seccomp profile (sandbox/seccomp.py)")
    read_only_proc: bool = Field(False, description="bwrap: /proc read-only (no /proc/<pid>/mem writes); "
                                 "the verifier's sandbox has it (sandbox/views.py)")
    hostname: str = "sandbox"
    rootfs: str | None = Field(None, description="bwrap: an unpacked image root shown as / under a fresh writable "
                               "layer, instead of the host's system dirs (sandbox/rootfs.py; tasks/images.py)")

    @field_validator("workspace_mount", "home")
    @classmethod
    def _absolute(cls, v: str) -> str:
        p = PurePosixPath(v)
        if not p.is_absolute() or ".." in p.parts or p == PurePosixPath("/"):
            raise ValueError(f"must be an absolute path below / without '..', got {v!r}")
        return str(p)

    @field_validator("extra_ro_binds")
    @classmethod
    def _binds(cls, v: list[str]) -> list[str]:
        for spec in v:
            for part in spec.split(":", 1):
                if not PurePosixPath(part).is_absolute():
                    raise ValueError(f"extra_ro_binds entries must be absolute paths, got {spec!r}")
        return v


class Sandbox(abc.ABC):
    """One isolated rollout environment. See the module docstring for the contract."""

    config: SandboxConfig
    inner_workspace: str
    proxy_base: str | None
    read_only_binds: bool = False  # honours cfg.extra_ro_binds (bwrap); views.fresh_view copies otherwise

    @property
    @abc.abstractmethod
    def workspace(self) -> Path: ...

    @property
    @abc.abstractmethod
    def alive(self) -> bool:
        """False once destroyed, or (bwrap) when the sandbox died on its own."""

    @abc.abstractmethod
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
    ) -> ProcessResult: ...

    @abc.abstractmethod
    def copy_in(self, host_src: Path | str, inner_dest: str) -> None: ...

    @abc.abstractmethod
    def copy_out(self, inner_src: str, host_dest: Path | str) -> None: ...

    @abc.abstractmethod
    def destroy(self) -> None: ...

    def inner_path(self, path: str) -> str:
        """An inner path: absolute stays, relative is taken from the workspace."""
        p = PurePosixPath(path)
        return str(p if p.is_absolute() else PurePosixPath(self.inner_workspace) / p)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()
