"""Task sandboxes: a fresh sandbox holding a task's workspace (the runner opens one per rollout; on
the task's image when it names one, with the image's files at the workspace path copied in first),
and `tasks validate`: a verifier must fail the untouched workspace and pass the reference solution
(where the task has one)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessrl.tasks.files import write_tree
from harnessrl.tasks.model import Task, check_mount_dir
from harnessrl.tasks.verifier import VerifierResult, run_verifier


def open_task_sandbox(task: Task, cfg: Any = None, proxy: Any = None) -> Any:
    """A fresh sandbox (harnessrl.sandbox) whose workspace holds the task's files, presented at the
    task's input_mount_dir (backends that cannot, e.g. local, use their own path). The config is
    validated again with that mount (model_copy would skip SandboxConfig's checks)."""
    from harnessrl.sandbox import SandboxConfig, make_sandbox

    mount = check_mount_dir(task.input_mount_dir, f"task {task.id!r}")
    fields = {**(cfg or SandboxConfig()).model_dump(), "workspace_mount": mount}
    image = None
    if task.image:  # ImageError (a SandboxError) names the image: the runner records a sandbox_error
        from harnessrl.tasks.images import image_sandbox_fields, prepare_image, sandbox_owner

        image = prepare_image(task.image, owner=sandbox_owner(int(fields["host_uid"])))
        fields = image_sandbox_fields(image, fields)
    cfg = SandboxConfig.model_validate(fields)
    with tempfile.TemporaryDirectory(prefix="harnessrl-task-") as tmp:
        if image is not None:
            from harnessrl.tasks.images import seed_workspace

            seed_workspace(image, mount, Path(tmp))
        write_tree(Path(tmp), task.files)
        return make_sandbox(cfg, workspace_src=tmp, proxy=proxy)


def run_commands(sandbox: Any, commands: tuple[str, ...], timeout_s: float = 60.0) -> str:
    """Run shell commands in the workspace one by one; returns '' or the first failure's message."""
    for cmd in commands:
        res = sandbox.run(["bash", "-c", cmd], timeout_s=timeout_s)
        if not res.ok:
            return f"{cmd!r} failed (exit {res.returncode}, timed out {res.timed_out}): {res.stderr.strip()[-300:]}"
    return ""


@dataclass(frozen=True)
class Validation:
    task_id: str
    untouched: VerifierResult
    reference: VerifierResult | None  # None: the task has no reference solution
    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


def validate_task(task: Task, cfg: Any = None) -> Validation:
    """Verifier on the untouched workspace (must run and not pass) and after the reference
    solution (must pass)."""
    with open_task_sandbox(task, cfg) as sb:
        untouched = run_verifier(task, sb)
    problems = []
    if untouched.status != "ok":
        problems.append(f"untouched workspace: {untouched.error}")
    elif task.passed(untouched.reward):
        problems.append(f"untouched workspace already passes (reward {untouched.reward:g})")
    reference = None
    if task.reference_solution:
        with open_task_sandbox(task, cfg) as sb:
            failure = run_commands(sb, task.reference_solution)
            reference = run_verifier(task, sb)
        if failure:
            problems.append(f"reference solution: {failure}")
        elif reference.status != "ok":
            problems.append(f"reference solution: {reference.error}")
        elif not task.passed(reference.reward):
            problems.append(f"reference solution does not pass (reward {reference.reward:g}, {reference.checks})")
    return Validation(task.id, untouched, reference, "; ".join(problems))
