"""The in-memory task: what every loader (ClawGym directory, native directory, built-in suite) produces.

A task is an instruction, the files of the agent's starting workspace, and a verifier that runs
after the agent, in a fresh sandbox on a copy of the workspace (tasks/verifier.py). A task may name
an image (`image`, tasks/images.py): its rollouts and its verifier then run on that root file system. All file contents are held as bytes, so two loaders of the
same task give equal objects and a task never depends on the directory it was read from.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, Literal

from harnessrl.errors import HarnessRLError

VerifierKind = Literal["checks", "reward_line"]
PassRule = Literal[">=", ">"]

DEFAULT_MOUNT = "/workspace"
CLAWGYM_MOUNT = "/root/.openclaw/workspace"
# Where a task may present its workspace: DEFAULT_MOUNT itself, or a directory strictly below one of
# these (never `/`, system paths such as /proc, /sys, /dev, /etc, /usr, /bin, /lib*, /var, /run, or
# a root itself, which would hide the HOME or /tmp the sandbox mounts there).
MOUNT_ROOTS = ("/workspace", "/root", "/home", "/mnt", "/data", "/srv", "/tmp", "/app")
WHOLE_MOUNTS = (DEFAULT_MOUNT, "/app")  # accepted themselves: /app is the WORKDIR of Terminal-Bench images
_MOUNT_PART = re.compile(r"[A-Za-z0-9._+@=-]+")


class TaskError(HarnessRLError, ValueError):
    """A task (or task directory) is malformed; the message says which file and how to fix it."""


class TaskDataError(TaskError):
    """A task directory holds data the loader refuses to read: a symbolic link, a fifo, socket or
    device, a file or a task over the size limits, or text that is not UTF-8 (the path is named)."""


def check_mount_dir(value: object, where: str) -> str:
    """`value` if it is an accepted input_mount_dir; else TaskError (`where` names the source)."""
    text = value if isinstance(value, str) else ""
    ok = (text.startswith("/") and not text.startswith("//") and posixpath.normpath(text) == text
          and all(_MOUNT_PART.fullmatch(p) and p not in (".", "..") for p in text.split("/")[1:])
          and (text in WHOLE_MOUNTS or any(text.startswith(root + "/") for root in MOUNT_ROOTS)))
    if not ok:
        raise TaskError(f"{where}: input_mount_dir {value!r} is not accepted; it must be an absolute, "
                        f"normalised path (no '.', '..', '//' or trailing '/'; letters, digits and ._+@=- "
                        f"only) that is {' or '.join(WHOLE_MOUNTS)} or lies below one of {', '.join(MOUNT_ROOTS)} "
                        f"(e.g. {CLAWGYM_MOUNT})")
    return text


@dataclass(frozen=True)
class Verifier:
    """How to score a finished workspace.

    After the agent finished, `command` runs under `bash -c` in a fresh sandbox holding a copy of
    the workspace, with `files` read-only at `<workspace>/<dest>/` (whatever the agent left there is
    not copied) and the working directory `<workspace>/<workdir>` (workdir "" = the workspace).
    `dest` and `workdir` are workspace-relative paths without '..' (TaskError otherwise).
    kind "checks": stdout is a JSON object of named checks in [0, 1] (optionally a "reward" key);
    kind "reward_line": the last stdout line is the reward as a float (ClawGym's reward.sh).
    """

    kind: VerifierKind
    command: str
    files: dict[str, bytes] = field(default_factory=dict)
    dest: str = ".verifier"
    workdir: str = ""
    timeout_s: float = 120.0

    def __post_init__(self) -> None:
        for name, value, empty_ok in (("dest", self.dest, False), ("workdir", self.workdir, True)):
            p = PurePosixPath(value)
            bad = p.is_absolute() or ".." in p.parts or value != (str(p) if value else "")
            bad = bad or (not empty_ok and not p.parts)  # dest "" or "." would be the workspace itself
            if bad:
                raise TaskError(f"verifier {name} must be a workspace-relative path without '..' (like "
                                f"'.verifier' or 'reward'), got {value!r}")


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
    image: str = ""  # the root file system the task runs on (tasks/images.py); "" = the host's system dirs
    metadata: dict[str, Any] = field(default_factory=dict)
    source: str = ""  # where it was loaded from ("builtin", a directory path); not part of equality

    def __post_init__(self) -> None:
        check_mount_dir(self.input_mount_dir, f"task {self.id!r}")

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
