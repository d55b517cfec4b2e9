"""Run a task's verifier in the sandbox the agent just used, and turn its output into a reward.

The verifier files are copied in only now (the agent never saw them), then the verifier command
runs with a time limit. Outcomes: status "ok" with a reward in [0, 1] and named checks, or status
"verifier_error" (crash, non-zero exit, timeout, unparsable or out-of-range output) with reward
None: a verifier that failed says nothing about the agent, so it is never scored as 0.
"""

from __future__ import annotations

import json
import math
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from harnessrl.errors import HarnessRLError
from harnessrl.tasks.files import write_tree
from harnessrl.tasks.model import Task

PAYLOAD_NAME = ".reward_payload.json"


class VerifierOutputError(HarnessRLError, ValueError):
    """The verifier's stdout is not what its kind promises."""


@dataclass(frozen=True)
class VerifierResult:
    status: Literal["ok", "verifier_error"]
    reward: float | None
    checks: dict[str, float] = field(default_factory=dict)
    error: str = ""
    duration_s: float = 0.0
    stdout_tail: str = ""


def run_verifier(task: Task, sandbox: Any, payload: dict[str, Any] | None = None,
                 timeout_s: float | None = None) -> VerifierResult:
    """Copy the verifier into `sandbox` (a harnessrl.sandbox.Sandbox) and run it.

    `payload` ({final_message, metadata, transcript}) is written to a JSON file whose inner path is
    in env OPENCLAW_REWARD_PAYLOAD (and HARNESSRL_REWARD_PAYLOAD) for the verifier to read.
    """
    v = task.verifier
    t0 = time.monotonic()
    dest = str(PurePosixPath(sandbox.inner_workspace) / v.dest)
    body = {"final_message": "", "metadata": task.metadata, "transcript": [], **(payload or {})}
    with tempfile.TemporaryDirectory(prefix="harnessrl-verifier-") as tmp:
        files = {**v.files, PAYLOAD_NAME: json.dumps(body, default=str).encode()}
        write_tree(Path(tmp), files)
        try:
            sandbox.copy_in(tmp, dest)
        except Exception as e:  # noqa: BLE001 - any copy failure is a verifier failure
            return VerifierResult("verifier_error", None, error=f"copying the verifier in failed: {e}",
                                  duration_s=time.monotonic() - t0)
    payload_path = f"{dest}/{PAYLOAD_NAME}"
    env = {"OPENCLAW_REWARD_PAYLOAD": payload_path, "HARNESSRL_REWARD_PAYLOAD": payload_path,
           "HARNESSRL_WORKSPACE": sandbox.inner_workspace}
    workdir = str(PurePosixPath(sandbox.inner_workspace) / v.workdir) if v.workdir else sandbox.inner_workspace
    limit = timeout_s if timeout_s is not None else v.timeout_s
    res = sandbox.run(["bash", "-c", v.command], env=env, cwd=workdir, timeout_s=limit)
    elapsed = time.monotonic() - t0
    tail = res.stdout[-2000:]
    if res.timed_out:
        return VerifierResult("verifier_error", None, error=f"verifier timed out after {limit:g}s",
                              duration_s=elapsed, stdout_tail=tail)
    if res.returncode != 0:
        return VerifierResult("verifier_error", None, duration_s=elapsed, stdout_tail=tail,
                              error=f"verifier exited {res.returncode}: {res.stderr.strip()[-500:]}")
    try:
        reward, checks = parse_output(v.kind, res.stdout)
    except VerifierOutputError as e:
        return VerifierResult("verifier_error", None, error=str(e), duration_s=elapsed, stdout_tail=tail)
    return VerifierResult("ok", reward, checks, duration_s=elapsed, stdout_tail=tail)


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
    except json.JSONDecodeError:
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
        except ValueError:
            raise VerifierOutputError(f"{what} is not a number: {value[:200]!r}") from None
    if isinstance(value, bool):
        value = float(value)
    if not isinstance(value, (int, float)) or math.isnan(value) or not 0.0 <= value <= 1.0:
        raise VerifierOutputError(f"{what} must be a number in [0, 1], got {value!r}")
    return float(value)
