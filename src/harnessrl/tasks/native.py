"""The native task directory format.

    my_task/
      task.toml        id, instruction, category, split, pass_threshold, reference_solution, ...
                       optional [verifier] (kind, command, dest, workdir, timeout_s), [metadata]
      workspace/       the agent's starting files
      verify.py        prints a JSON object of named checks in [0, 1] (reward = their mean, or
      | verify.sh      an explicit "reward" key); runs with the workspace as working directory
      verifier/        optional extra verifier files (copied in beside verify.py)

Verifier files are copied to `<workspace>/.verifier/` only after the agent finished.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - python 3.10
    import tomli as tomllib  # type: ignore[no-redef, unused-ignore]

from harnessrl.tasks.files import TaskDataReader, TaskLimits, write_tree
from harnessrl.tasks.model import DEFAULT_MOUNT, Task, TaskError, Verifier, check_mount_dir

TASK_TOML = "task.toml"
_FIELDS = ("id", "instruction", "category", "split", "family", "variant", "pass_threshold",
           "pass_rule", "input_mount_dir", "reference_solution")


def is_native_dir(path: Path) -> bool:
    """Whether `path` looks like a native task (task.toml present, even as a link: the loader
    then refuses it by name rather than skipping the task)."""
    return path.is_dir() and os.path.lexists(path / TASK_TOML)


def load_native(path: Path, limits: TaskLimits | None = None) -> Task:
    """Load one native task directory; TaskError names the missing or malformed part
    (TaskDataError for links, special files, files over `limits` and text that is not UTF-8)."""
    with TaskDataReader(path, limits) as reader:
        spec = _task_toml(path, reader.read_text(TASK_TOML))
        files = reader.read_tree("workspace")
        verifier = _load_verifier(path, spec.get("verifier") or {}, reader)
    where = str(path / TASK_TOML)
    try:
        return Task(
            id=spec["id"],
            instruction=spec["instruction"],
            files=files,
            verifier=verifier,
            category=str(spec.get("category", "general")),
            split=str(spec.get("split", "")),
            family=str(spec.get("family", "")),
            variant=int(spec.get("variant", 0)),
            pass_threshold=float(spec.get("pass_threshold", 1.0)),
            pass_rule=_pass_rule(path, spec.get("pass_rule", ">=")),
            input_mount_dir=check_mount_dir(spec.get("input_mount_dir", DEFAULT_MOUNT), where),
            reference_solution=tuple(str(c) for c in spec.get("reference_solution", ())),
            metadata=dict(spec.get("metadata", {})),
            source=str(path),
        )
    except (TypeError, ValueError) as e:
        if isinstance(e, TaskError):
            raise
        raise TaskError(f"{where}: a field has the wrong type ({e})") from None


def _task_toml(path: Path, text: str) -> dict[str, Any]:
    """The parsed task.toml with its required fields and keys checked."""
    try:
        spec = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as e:
        problem = f"{type(e).__name__}: {str(e)[:200]}"
        raise TaskError(f"{path / TASK_TOML}: cannot parse TOML ({problem})") from None
    for key in ("id", "instruction"):
        if not isinstance(spec.get(key), str) or not spec[key]:
            raise TaskError(f"{path / TASK_TOML}: missing string field {key!r}")
    unknown = set(spec) - set(_FIELDS) - {"verifier", "metadata"}
    if unknown:
        raise TaskError(f"{path / TASK_TOML}: unknown keys {sorted(unknown)}; known: {list(_FIELDS)}")
    for key in ("verifier", "metadata"):
        if not isinstance(spec.get(key, {}), dict):
            raise TaskError(f"{path / TASK_TOML}: [{key}] must be a table")
    return spec


def _pass_rule(path: Path, rule: Any) -> Any:
    if rule not in (">=", ">"):
        raise TaskError(f"{path / TASK_TOML}: pass_rule must be '>=' or '>', got {rule!r}")
    return rule


def _load_verifier(path: Path, spec: dict[str, Any], reader: TaskDataReader) -> Verifier:
    files = reader.read_tree("verifier")
    for name in ("verify.py", "verify.sh"):
        if reader.exists(name):
            files[name] = reader.read_file(name)
    dest = str(spec.get("dest", ".verifier"))
    command = spec.get("command")
    if command is None:
        if "verify.py" in files:
            command = f"python3 {dest}/verify.py"
        elif "verify.sh" in files:
            command = f"bash {dest}/verify.sh"
        else:
            raise TaskError(f"{path}: needs verify.py or verify.sh (or [verifier] command in task.toml)")
    kind = spec.get("kind", "checks")
    if kind not in ("checks", "reward_line"):
        raise TaskError(f"{path / TASK_TOML}: verifier kind must be 'checks' or 'reward_line'")
    try:
        timeout_s = float(spec.get("timeout_s", 120.0))
    except (TypeError, ValueError):
        raise TaskError(f"{path / TASK_TOML}: [verifier] timeout_s must be a number") from None
    return Verifier(kind=kind, command=str(command), files=files, dest=dest,
                    workdir=str(spec.get("workdir", "")), timeout_s=timeout_s)


def write_native(task: Task, path: Path) -> Path:
    """Write a task as a native directory; `load_native` of the result gives an equal task."""
    v = task.verifier
    lines = [f"{k} = {_toml_value(getattr(task, k))}" for k in _FIELDS]
    lines += ["", "[verifier]"] + [f"{k} = {_toml_value(getattr(v, k))}"
                                   for k in ("kind", "command", "dest", "workdir", "timeout_s")]
    if task.metadata:
        lines += ["", "[metadata]"] + [f"{json.dumps(k)} = {_toml_value(val)}" for k, val in task.metadata.items()]
    path.mkdir(parents=True, exist_ok=True)
    (path / TASK_TOML).write_text("\n".join(lines) + "\n")
    write_tree(path / "workspace", task.files)
    write_tree(path / "verifier", v.files)
    return path


def _toml_value(value: Any) -> str:
    """A TOML literal for str/bool/int/float and lists/dicts of them (JSON string escapes are TOML's)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return json.dumps(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {_toml_value(v)}" for k, v in value.items()) + "}"
    raise TaskError(f"cannot write {type(value).__name__} value {value!r} to task.toml")
