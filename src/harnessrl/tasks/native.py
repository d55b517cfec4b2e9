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
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - python 3.10
    import tomli as tomllib  # type: ignore[no-redef, unused-ignore]

from harnessrl.tasks.files import read_tree, write_tree
from harnessrl.tasks.model import DEFAULT_MOUNT, Task, TaskError, Verifier

TASK_TOML = "task.toml"
_FIELDS = ("id", "instruction", "category", "split", "family", "variant", "pass_threshold",
           "pass_rule", "input_mount_dir", "reference_solution")


def is_native_dir(path: Path) -> bool:
    return (path / TASK_TOML).is_file()


def load_native(path: Path) -> Task:
    """Load one native task directory; TaskError names the missing or malformed part."""
    try:
        spec = tomllib.loads((path / TASK_TOML).read_text())
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise TaskError(f"{path / TASK_TOML}: cannot parse TOML ({e})") from e
    for key in ("id", "instruction"):
        if not isinstance(spec.get(key), str) or not spec[key]:
            raise TaskError(f"{path / TASK_TOML}: missing string field {key!r}")
    unknown = set(spec) - set(_FIELDS) - {"verifier", "metadata"}
    if unknown:
        raise TaskError(f"{path / TASK_TOML}: unknown keys {sorted(unknown)}; known: {list(_FIELDS)}")
    return Task(
        id=spec["id"],
        instruction=spec["instruction"],
        files=read_tree(path / "workspace"),
        verifier=_load_verifier(path, spec.get("verifier") or {}),
        category=str(spec.get("category", "general")),
        split=str(spec.get("split", "")),
        family=str(spec.get("family", "")),
        variant=int(spec.get("variant", 0)),
        pass_threshold=float(spec.get("pass_threshold", 1.0)),
        pass_rule=_pass_rule(path, spec.get("pass_rule", ">=")),
        input_mount_dir=str(spec.get("input_mount_dir", DEFAULT_MOUNT)),
        reference_solution=tuple(str(c) for c in spec.get("reference_solution", ())),
        metadata=dict(spec.get("metadata", {})),
        source=str(path),
    )


def _pass_rule(path: Path, rule: Any) -> Any:
    if rule not in (">=", ">"):
        raise TaskError(f"{path / TASK_TOML}: pass_rule must be '>=' or '>', got {rule!r}")
    return rule


def _load_verifier(path: Path, spec: dict[str, Any]) -> Verifier:
    files = read_tree(path / "verifier")
    for name in ("verify.py", "verify.sh"):
        if (path / name).is_file():
            files[name] = (path / name).read_bytes()
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
    return Verifier(kind=kind, command=str(command), files=files, dest=dest,
                    workdir=str(spec.get("workdir", "")), timeout_s=float(spec.get("timeout_s", 120.0)))


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
