"""The in-memory task: what every loader (ClawGym directory, native directory, built-in suite) produces.

A task is an instruction, the files of the agent's starting workspace, and a verifier that runs
after the agent in the same sandbox. All file contents are held as bytes, so two loaders of the
same task give equal objects and a task never depends on the directory it was read from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from harnessrl.errors import HarnessRLError

VerifierKind = Literal["checks", "reward_line"]
PassRule = Literal[">=", ">"]

DEFAULT_MOUNT = "/workspace"
CLAWGYM_MOUNT = "/root/.openclaw/workspace"


class TaskError(HarnessRLError, ValueError):
    """A task (or task directory) is malformed; the message says which file and how to fix it."""


@dataclass(frozen=True)
class Verifier:
    """How to score a finished workspace.

    `files` are copied to `<workspace>/<dest>/` only after the agent finished; `command` then runs
    under `bash -c` with the working directory `<workspace>/<workdir>` (workdir "" = the workspace).
    kind "checks": stdout is a JSON object of named checks in [0, 1] (optionally a "reward" key);
    kind "reward_line": the last stdout line is the reward as a float (ClawGym's reward.sh).
    """

    kind: VerifierKind
    command: str
    files: dict[str, bytes] = field(default_factory=dict)
    dest: str = ".verifier"
    workdir: str = ""
    timeout_s: float = 120.0


@dataclass(frozen=True)
class Task:
    id: str
    instruction: str
    files: dict[str, bytes]  # workspace-relative path -> content
    verifier: Verifier
    category: str = "general"
    split: str = "train"
    family: str = ""
    variant: int = 0
    pass_threshold: float = 1.0
    pass_rule: PassRule = ">="
    input_mount_dir: str = DEFAULT_MOUNT
    reference_solution: tuple[str, ...] = ()  # shell commands run in the workspace; () = none
    metadata: dict[str, Any] = field(default_factory=dict)
    source: str = ""  # where it was loaded from ("builtin", a directory path); not part of equality

    def passed(self, reward: float | None) -> bool:
        """Whether a reward counts as a pass for this task (None = no reward = not passed)."""
        if reward is None:
            return False
        if self.pass_rule == ">":
            return reward > self.pass_threshold
        return reward >= self.pass_threshold - 1e-9

    def same_as(self, other: "Task") -> bool:
        """Equality of everything but `source` (two loaders of one task agree on this)."""
        return _key(self) == _key(other)


def _key(task: Task) -> tuple[Any, ...]:
    return tuple(getattr(task, name) for name in Task.__dataclass_fields__ if name != "source")


def text_files(files: dict[str, str]) -> dict[str, bytes]:
    """Convenience: a {path: text} mapping as the {path: bytes} a Task holds."""
    return {path: content.encode() for path, content in files.items()}
