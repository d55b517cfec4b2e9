"""What the chained and office task sets share: their verifier (step_checker.py with the task's
checks) and the turn budget they recommend.

These sets are NOT part of `builtin:all` or the four suite splits (those stay the 402 one-job
tasks they always were); they are selected by their own specs, `builtin:chain:<split>` and
`builtin:office:<split>` (see suite/__init__.py).
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from harnessrl.tasks.model import Verifier


def step_checker_source() -> bytes:
    return resources.files("harnessrl.tasks.suite").joinpath("step_checker.py").read_bytes()


def step_verifier(checks: list[dict[str, Any]], checker: bytes) -> Verifier:
    """The verifier of a multi-step task: the standalone step checker and its checks."""
    return Verifier(kind="checks", command="python3 .verifier/verify.py",
                    files={"verify.py": checker, "checks.json": json.dumps(checks, indent=1).encode()},
                    dest=".verifier", timeout_s=60.0)


def max_turns_for(steps: int) -> int:
    """The model calls a task with this many steps should get: one to look, two per step (a
    command and a check of its output), one to finish."""
    return 2 + 2 * steps
