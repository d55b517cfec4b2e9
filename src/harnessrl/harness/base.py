"""The harness adapter contract and the one way every adapter runs its harness in a sandbox.

An adapter is a black box driver: it writes config files, sets env vars and passes CLI flags,
never patches or imports harness code. Each run gets private HOME / TMPDIR dirs inside the
sandbox, and goes through `launcher.py`, which bounds it and kills its whole process tree.
"""

from __future__ import annotations

import hashlib
import json
import sys
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from harnessrl.errors import HarnessRLError
from harnessrl.harness import launcher

if TYPE_CHECKING:
    from harnessrl.harness.profiles import Profile

HarnessStatus = Literal["ok", "harness_error", "timeout"]
TAIL_CHARS = 4000
# Extra seconds the sandbox waits beyond the launcher's own limit (the launcher kills first).
SANDBOX_SLACK_S = 30.0


@dataclass(frozen=True)
class HarnessResult:
    status: HarnessStatus
    exit_code: int | None
    final_message: str
    duration_s: float
    stdout_tail: str = ""
    stderr_tail: str = ""
    error: str = ""
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. num_turns reported by the harness


class ProcessResultLike(Protocol):
    """What adapters read of a finished process (harnessrl.sandbox.ProcessResult; read-only)."""

    @property
    def returncode(self) -> int | None: ...

    @property
    def stdout(self) -> str | bytes: ...

    @property
    def stderr(self) -> str | bytes: ...

    @property
    def timed_out(self) -> bool: ...

    @property
    def duration_s(self) -> float: ...


class SandboxLike(Protocol):
    """What adapters need from harnessrl.sandbox.Sandbox."""

    def run(self, argv: list[str], *, env: dict[str, str] | None = None, cwd: str | None = None,
            timeout_s: float | None = None) -> ProcessResultLike: ...


class HarnessAdapter(ABC):
    """What the runner drives: `run` one task to completion inside a sandbox. The optional
    capabilities have their defaults here, so the runner calls each of them on every adapter."""

    name: ClassVar[str] = "abstract"
    # name -> Profile (aliases included) and the default's name; an adapter without profiles has none
    profiles: ClassVar[Mapping[str, Profile]] = {}
    default_profile: ClassVar[str] = ""
    # False for a harness with no turn limit of its own (Codex, OpenClaw): the runner then gives its
    # proxy key a budget of max_turns model calls, and the call past it gets a typed 400
    enforces_max_turns: ClassVar[bool] = True
    profile: Profile | None = None  # the resolved profile (set by adapters with profiles)

    def memory_floor_mb(self) -> int | None:
        """The least sandbox memory (MiB) this harness runs in, or None; a run's smaller
        `sandbox.memory_mb` is raised to it for this harness's rollouts (rollout/jobs.py)."""
        return None

    def ro_paths(self) -> list[Path]:
        """Host paths the sandbox must bind read-only (install dirs, runtimes)."""
        return []

    def preflight(self) -> str | None:
        """Why this harness cannot run here (e.g. not installed), or None."""
        return None

    def check(self) -> None:
        """HarnessConfigError when what the adapter was given cannot run (a `command` harness's
        binary or paths); called once before any engine starts."""

    def bind_proxy(self, link: object) -> None:
        """Take the runner's proxy link (rollout/proxy_link.py) before any rollout: an agent loop in
        the run process (harness/whitebox.py) samples from its engine; a harness in a sandbox
        reaches the proxy over HTTP and needs nothing."""

    def describe(self) -> dict[str, Any]:
        """What is stored with each rollout as `meta["harness_profile"]` ({} without a profile)."""
        return self.profile.describe() if self.profile is not None else {}

    @abstractmethod
    def run(self, sandbox: SandboxLike, *, instruction: str, proxy_base: str, api_key: str, model: str,
            timeout_s: float, max_turns: int, workdir: str | None = None) -> HarnessResult:
        """Run one task to completion inside `sandbox`. `proxy_base` is the in-sandbox proxy URL
        including `/r/<key>` and excluding `/v1`."""


class HarnessConfigError(HarnessRLError, ValueError):
    """A harness spec or option is invalid (message says how to fix it)."""


@dataclass(frozen=True)
class RunDirs:
    """Private per-run dirs inside the sandbox. Paths hold `@RUN@`, which the launcher replaces
    with `$HOME/.harnessrl/<run_id>` of the sandbox (never the workspace, never /tmp)."""

    run_id: str
    root: str = launcher.RUN_TOKEN

    @classmethod
    def fresh(cls) -> RunDirs:
        return cls(uuid.uuid4().hex[:12])

    @classmethod
    def for_task(cls, instruction: str) -> RunDirs:
        """The same dirs for every run of one task (each sandbox has its own HOME): harnesses write
        these paths into their prompts (Claude Code's memory dir), so every rollout of a group, and a
        replayed branch (proxy/replay.py), renders the same prompt."""
        return cls("t" + hashlib.sha1(instruction.encode()).hexdigest()[:11])

    @property
    def home(self) -> str:
        return f"{self.root}/home"

    @property
    def tmp(self) -> str:
        return f"{self.root}/tmp"

    def sub(self, name: str) -> str:
        return f"{self.root}/{name}"

    def all(self) -> list[str]:
        return [self.home, self.tmp]


def quiet_env(dirs: RunDirs) -> dict[str, str]:
    """Env every harness gets: private HOME/TMPDIR, no telemetry, no update checks, no colours."""
    return {
        "HOME": dirs.home,
        "TMPDIR": dirs.tmp,
        "TMP": dirs.tmp,
        "TEMP": dirs.tmp,
        "XDG_CONFIG_HOME": f"{dirs.home}/.config",
        "XDG_CACHE_HOME": f"{dirs.home}/.cache",
        "XDG_DATA_HOME": f"{dirs.home}/.local/share",
        "XDG_STATE_HOME": f"{dirs.home}/.local/state",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "CI": "1",
        "DO_NOT_TRACK": "1",
        "NO_UPDATE_NOTIFIER": "1",
        "NPM_CONFIG_UPDATE_NOTIFIER": "false",
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


@dataclass(frozen=True)
class LaunchSpec:
    """Everything one harness run needs; turned into a launcher spec."""

    argv: list[str]
    env: dict[str, str]  # added to the sandbox's env; values may use @RUN@ and @PATH@
    cwd: str | None
    run_id: str
    dirs: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)  # in-sandbox path -> content
    collect: list[str] = field(default_factory=list)  # in-sandbox files to bring back
    grace_s: float = 3.0


@dataclass(frozen=True)
class LaunchOutcome:
    status: HarnessStatus
    exit_code: int | None
    stdout: str
    stderr: str
    duration_s: float
    files: dict[str, str | None]
    error: str = ""
    limits_hit: tuple[str, ...] = ()  # sandbox limits that bit ("memory", "procs"): see sandbox.base
    cpu: dict[str, float] = field(default_factory=dict)  # the launcher's CPU report (split_cpu)


def launcher_argv(spec: LaunchSpec, timeout_s: float, python: str | None = None) -> list[str]:
    payload = {
        "run_id": spec.run_id, "argv": spec.argv, "env": spec.env, "cwd": spec.cwd, "dirs": spec.dirs,
        "files": spec.files,
        "collect": spec.collect, "timeout_s": float(timeout_s), "grace_s": spec.grace_s,
    }
    source = Path(launcher.__file__).read_text()
    # -I isolated, -S no site: the launcher is stdlib only, and skipping site (the venv's .pth files)
    # is ~8 ms of CPU a rollout
    return [python or sys.executable, "-IS", "-c", source, json.dumps(payload)]


def _text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data


def split_collected(stdout: str) -> tuple[str, dict[str, str | None]]:
    """Strip the launcher's trailing files line from stdout; return (stdout, files)."""
    idx = stdout.rfind("\n" + launcher.FILES_MARKER)
    if idx < 0:
        if stdout.startswith(launcher.FILES_MARKER):
            idx = -1
        else:
            return stdout, {}
    line = stdout[idx + 1:].split("\n", 1)[0]
    try:
        files = json.loads(line[len(launcher.FILES_MARKER):])
    except ValueError:
        return stdout, {}
    return stdout[:max(idx, 0)], files


def split_cpu(stdout: str) -> tuple[str, dict[str, float]]:
    """Strip the launcher's last line `@@HARNESSRL_CPU <json>` from stdout; return (stdout, CPU
    seconds: harness_user_s, harness_system_s, launcher_user_s, launcher_system_s; {} if absent)."""
    idx = stdout.rfind(launcher.CPU_MARKER)
    if idx < 0 or (idx > 0 and stdout[idx - 1] != "\n"):
        return stdout, {}
    line = stdout[idx + len(launcher.CPU_MARKER):].split("\n", 1)[0]
    try:
        cpu = {str(k): float(v) for k, v in json.loads(line).items()}
    except (ValueError, TypeError, AttributeError):
        return stdout, {}
    return stdout[:max(idx - 1, 0)], cpu


def classify(exit_code: int | None, sandbox_timed_out: bool) -> HarnessStatus:
    if sandbox_timed_out or exit_code == launcher.TIMEOUT_EXIT:
        return "timeout"
    return "ok" if exit_code == 0 else "harness_error"


def launch(sandbox: SandboxLike, spec: LaunchSpec, timeout_s: float,
           python: str | None = None) -> LaunchOutcome:
    """Run `spec` through the launcher inside `sandbox`, bounded by `timeout_s`."""
    res = sandbox.run(launcher_argv(spec, timeout_s, python), cwd=spec.cwd,
                      timeout_s=timeout_s + spec.grace_s + SANDBOX_SLACK_S)
    stdout, cpu = split_cpu(_text(res.stdout))
    stdout, files = split_collected(stdout)
    stderr = _text(res.stderr)
    status = classify(res.returncode, bool(res.timed_out))
    error = ""
    if status == "timeout":
        error = f"harness did not finish within {timeout_s:.0f}s; its process tree was killed"
    elif status == "harness_error":
        error = f"harness exited with code {res.returncode}"
        last = [ln for ln in stderr.strip().splitlines() if ln.strip()]
        if last:
            error += f": {last[-1][:300]}"
    limits = tuple(getattr(res, "limits_hit", ()) or ())
    if limits:
        error = (error + "; " if error else "") + f"sandbox limit hit: {', '.join(limits)}"
    return LaunchOutcome(status, res.returncode, stdout, stderr, float(res.duration_s), files, error, limits, cpu)


def tail(text: str, n: int = TAIL_CHARS) -> str:
    return text[-n:]


def result_from(outcome: LaunchOutcome, final_message: str, meta: dict[str, Any] | None = None,
                error: str | None = None, status: HarnessStatus | None = None) -> HarnessResult:
    meta = dict(meta or {})
    if outcome.limits_hit:
        meta["sandbox_limits"] = list(outcome.limits_hit)
    if outcome.cpu:
        meta["cpu_s"] = dict(outcome.cpu)  # the harness process tree and the launcher (profile/run_profile.py)
    return HarnessResult(
        status=status or outcome.status, exit_code=outcome.exit_code, final_message=final_message,
        duration_s=outcome.duration_s, stdout_tail=tail(outcome.stdout), stderr_tail=tail(outcome.stderr),
        error=outcome.error if error is None else error, meta=meta)


def openai_base(proxy_base: str) -> str:
    return proxy_base.rstrip("/") + "/v1"


def anthropic_base(proxy_base: str) -> str:
    return proxy_base.rstrip("/")


def json_lines(text: str) -> list[dict[str, Any]]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                out.append(obj)
    return out


@dataclass(frozen=True)
class RunRequest:
    """The arguments of one `HarnessAdapter.run` call (what `build` turns into a LaunchSpec)."""

    instruction: str
    proxy_base: str
    api_key: str
    model: str
    timeout_s: float
    max_turns: int
    workdir: str | None
    dirs: RunDirs


class LaunchedAdapter(HarnessAdapter):
    """Shared `run` of the adapters: build a LaunchSpec, launch it, parse the outcome."""

    @abstractmethod
    def build(self, req: RunRequest) -> LaunchSpec:
        """The harness's argv, env and files for one run."""

    def parse(self, req: RunRequest, outcome: LaunchOutcome) -> HarnessResult:
        return result_from(outcome, final_message=last_line(outcome.stdout))

    def run(self, sandbox: SandboxLike, *, instruction: str, proxy_base: str, api_key: str, model: str,
            timeout_s: float, max_turns: int, workdir: str | None = None) -> HarnessResult:
        if not instruction.strip():
            raise HarnessConfigError("instruction is empty")
        problem = self.preflight()
        if problem:
            return HarnessResult("harness_error", None, "", 0.0, error=problem)
        req = RunRequest(instruction, proxy_base, api_key, model, float(timeout_s), int(max_turns),
                         workdir or getattr(sandbox, "inner_workspace", None), RunDirs.for_task(instruction))
        outcome = launch(sandbox, self.build(req), req.timeout_s)
        return self.parse(req, outcome)


class CachedInstallAdapter(LaunchedAdapter):
    """An adapter for a harness that `harnessrl harness install` puts in the cache (npm packages):
    the install dir is bound read-only into the sandbox and a missing install is a clear error."""

    cache: Path | None = None

    def ro_paths(self) -> list[Path]:
        from harnessrl.harness import install

        return [install.harness_dir(self.name, self.cache), *python_ro_paths()]

    def preflight(self) -> str | None:
        return not_installed(self.name, self.cache)


def not_installed(name: str, cache: Path | None = None) -> str | None:
    """The installer's verdict as a preflight message."""
    from harnessrl.harness import install

    info = install.installed_info(name, cache)
    if info.installed:
        return None
    return f"{name} is not installed ({info.note}); run `harnessrl harness install {name}`"


def last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def python_ro_paths() -> list[Path]:
    """The venv and its base interpreter (the launcher runs with this python)."""
    return [Path(sys.prefix), Path(sys.base_prefix)]
