"""Score a finished workspace with the task's verifier, out of the agent's reach.

The verifier runs in a FRESH sandbox (sandbox/views.py: fresh_view): a copy of the agent's workspace,
without whatever the agent left at the verifier's own path, and the verifier's files (with the
payload) taken from the task on the host and shown read-only at that path (bwrap). None of the
agent's processes, HOME or /tmp reach it, and nothing the agent wrote can replace the verifier's
code (an agent that planted `reward/json.py` used to win reward 1.0).

Outcomes (VerifierResult.status):
- "ok": a reward in [0, 1] and named checks;
- "verifier_error": the verifier ran on the agent's workspace and failed (crash, non-zero exit,
  timeout, unparsable or out-of-range output, whatever it printed), or the workspace was lost
  (the agent's sandbox died). Parsing is total: any output is one of these two. The rollout
  runner scores it 0: on a workspace the policy left, a verifier failure is the policy's outcome
  (a verifier bug shows up in `harnessrl tasks validate`, which runs the reference solution);
- "workspace_link": the workspace holds a link into the verifier's own files or out of the
  workspace (sandbox/views.py, ``vet_links``); the verifier did not run. ``meta["workspace_link"]``
  names the link, its target and what it reaches. The policy's doing: scored 0;
- "reward_forged": the verifier found its reward channel tampered with (a Harbor test.sh's
  reward file written by another process, locked or not a regular file: tasks/harbor.py) and
  said so by exiting FORGERY_EXIT with a last stdout line {"harnessrl_forgery": KIND, ...};
  ``meta["reward_forged"]`` is KIND. The policy's doing: scored 0;
- "sandbox_error": the verifier's own sandbox could not start (the host's problem, not the agent's).
A verifier that runs the agent's code (say `python3 test_calc.py`) must not let that code's
output become its own last line: stdout is the reward channel.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, Literal

from harnessrl.errors import HarnessRLError
from harnessrl.tasks.files import write_tree
from harnessrl.tasks.model import Task, Verifier

if TYPE_CHECKING:
    from harnessrl.sandbox.base import Sandbox

PAYLOAD_NAME = ".reward_payload.json"
FORGERY_EXIT = 86  # a verifier's exit status for "my reward channel was forged" (last line: the kind)
FORGERY_KEY = "harnessrl_forgery"
# outcomes the policy caused that are scored 0 whatever the harness did (rollout/jobs.py)
FORGERY_STATUSES = ("workspace_link", "reward_forged")


class VerifierOutputError(HarnessRLError, ValueError):
    """The verifier's stdout is not what its kind promises."""


@dataclass(frozen=True)
class VerifierResult:
    status: Literal["ok", "verifier_error", "sandbox_error", "workspace_link", "reward_forged"]
    reward: float | None
    checks: dict[str, float] = field(default_factory=dict)
    error: str = ""
    duration_s: float = 0.0
    stdout_tail: str = ""
    # seconds of its stages (profile/run_profile.py): copy_out_s, sandbox_s (its fresh sandbox), check_s, teardown_s
    stages: dict[str, float] = field(default_factory=dict)
    # workspace_link: {"workspace_link": {path, target, reaches, more}}; reward_forged: {"reward_forged": kind}
    meta: dict[str, Any] = field(default_factory=dict)


def run_verifier(task: Task, sandbox: Sandbox, payload: dict[str, Any] | None = None,
                 timeout_s: float | None = None, check_links: bool = True) -> VerifierResult:
    """Score the workspace of `sandbox` in a fresh sandbox; never raises.

    `payload` ({final_message, metadata, transcript}) is written to a JSON file whose inner path is
    in env OPENCLAW_REWARD_PAYLOAD (and HARNESSRL_REWARD_PAYLOAD) for the verifier to read.
    `check_links` False: the workspace's links are not vetted (only to show what that stops).
    """
    from harnessrl.sandbox.base import WorkspaceLost
    from harnessrl.sandbox.views import WorkspaceLinkRefused, fresh_view

    v = task.verifier
    t0 = time.monotonic()
    dest = str(PurePosixPath(sandbox.inner_workspace) / v.dest)
    body = {"final_message": "", "metadata": task.metadata, "transcript": [], **(payload or {})}
    with tempfile.TemporaryDirectory(prefix="harnessrl-verifier-") as tmp:
        files = {**v.files, PAYLOAD_NAME: json.dumps(body, default=str).encode()}
        vdir = Path(tmp) / "verifier"
        write_tree(vdir, files)
        _readable(Path(tmp))
        stages: dict[str, float] = {}
        try:
            view = fresh_view(sandbox, exclude=[v.dest], ro_dirs={dest: vdir}, timings=stages,
                              check_links=check_links)
        except WorkspaceLinkRefused as e:  # the policy's link into the verifier's files or out: 0
            return VerifierResult("workspace_link", None, error=str(e), duration_s=time.monotonic() - t0,
                                  meta={"workspace_link": e.detail()})
        except WorkspaceLost as e:
            return VerifierResult("verifier_error", None, error=str(e), duration_s=time.monotonic() - t0)
        except Exception as e:  # noqa: BLE001 - the verifier's sandbox did not start: the host's problem
            return VerifierResult("sandbox_error", None, error=f"the verifier's sandbox did not start: {e}",
                                  duration_s=time.monotonic() - t0)
        with view:
            t_check = time.monotonic()
            result = _run_in_view(v, view, dest, timeout_s, t0)
            t_down = time.monotonic()
        stages.update(check_s=t_down - t_check, teardown_s=time.monotonic() - t_down)
        return replace(result, stages=stages)


def _run_in_view(v: Verifier, view: Sandbox, dest: str, timeout_s: float | None, t0: float) -> VerifierResult:
    payload_path = f"{dest}/{PAYLOAD_NAME}"
    env = {"OPENCLAW_REWARD_PAYLOAD": payload_path, "HARNESSRL_REWARD_PAYLOAD": payload_path,
           "HARNESSRL_WORKSPACE": view.inner_workspace}
    workdir = str(PurePosixPath(view.inner_workspace) / v.workdir) if v.workdir else view.inner_workspace
    limit = timeout_s if timeout_s is not None else v.timeout_s
    res = view.run(["bash", "-c", v.command], env=env, cwd=workdir, timeout_s=limit)
    elapsed = time.monotonic() - t0
    tail = res.stdout[-2000:]
    if res.timed_out:
        return VerifierResult("verifier_error", None, error=f"verifier timed out after {limit:g}s",
                              duration_s=elapsed, stdout_tail=tail)
    if res.returncode == FORGERY_EXIT:
        kind = _forgery(res.stdout)
        if kind:
            return VerifierResult("reward_forged", None, duration_s=elapsed, stdout_tail=tail,
                                  error=f"reward forged ({kind}): {res.stderr.strip()[-500:]}",
                                  meta={"reward_forged": kind})
    if res.returncode != 0:
        return VerifierResult("verifier_error", None, duration_s=elapsed, stdout_tail=tail,
                              error=f"verifier exited {res.returncode}: {res.stderr.strip()[-500:]}")
    try:
        reward, checks = parse_output(v.kind, res.stdout)
    except Exception as e:  # noqa: BLE001 - total: whatever it printed is a verifier_error, never a crash
        return VerifierResult("verifier_error", None, error=f"verifier output: {str(e)[:500]}",
                              duration_s=elapsed, stdout_tail=tail)
    return VerifierResult("ok", reward, checks, duration_s=elapsed, stdout_tail=tail)


def _forgery(stdout: str) -> str:
    """The kind a verifier's last stdout line names as {FORGERY_KEY: KIND}, or ""."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    obj = _json_object(lines[-1]) if lines else None
    kind = obj.get(FORGERY_KEY) if obj else None
    return kind[:100] if isinstance(kind, str) and kind else ""


def _readable(root: Path) -> None:
    """World-readable (the verifier's sandbox user is another uid than the host's when run as root)."""
    root.chmod(0o755)
    for p in root.rglob("*"):
        p.chmod(0o755 if p.is_dir() or p.stat().st_mode & 0o100 else 0o644)


def parse_output(kind: str, stdout: str) -> tuple[float, dict[str, float]]:
    """(reward, checks) from a verifier's stdout; VerifierOutputError when it is malformed."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise VerifierOutputError("verifier printed nothing")
    if kind == "reward_line":
        reward = _unit_float(lines[-1], "last stdout line")
        checks = next((c for c in (_checks_or_none(line) for line in reversed(lines[:-1])) if c), {})
        return reward, checks
    obj = _json_object(stdout.strip()) or _json_object(lines[-1])
    if obj is None:
        raise VerifierOutputError(f"verifier output is not a JSON object of checks: {lines[-1][:200]!r}")
    explicit = obj.pop("reward", None)
    checks = {str(k): _unit_float(val, f"check {k!r}") for k, val in obj.items()}
    if explicit is not None:
        return _unit_float(explicit, "reward"), checks
    if not checks:
        raise VerifierOutputError("verifier printed no checks and no reward")
    return sum(checks.values()) / len(checks), checks


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):  # JSONDecodeError, ints past the digit limit, deep nesting
        return None
    return obj if isinstance(obj, dict) else None


def _checks_or_none(line: str) -> dict[str, float] | None:
    obj = _json_object(line)
    if not obj:
        return None
    try:
        return {str(k): _unit_float(val, str(k)) for k, val in obj.items()}
    except VerifierOutputError:
        return None


def _unit_float(value: Any, what: str) -> float:
    if isinstance(value, str):
        try:
            value = float(value)
        except (ValueError, OverflowError):
            raise VerifierOutputError(f"{what} is not a number: {value[:200]!r}") from None
    if isinstance(value, bool):
        value = float(value)
    if not isinstance(value, (int, float)) or math.isnan(value) or not 0.0 <= value <= 1.0:
        raise VerifierOutputError(f"{what} must be a number in [0, 1], got {value!r}")
    return float(value)
