"""ClawGym task directories (the public format of ClawGym-Bench and its train data).

    task_XXXX/
      data_entry.json   {"task_id", "user_query", "input_mount_dir"?, "metadata": {"category", ...}}
      input_files/      the agent's starting workspace, presented at input_mount_dir
      reward/reward.sh  run as `bash reward.sh` after the agent, last stdout line = reward
      reward/check.py   (and anything else in reward/) copied in with reward.sh

The reward folder lands in `<workspace>/reward/` only after the agent finished; it runs there with
`OPENCLAW_REWARD_PAYLOAD` set, 120 s limit. ClawGym counts a rollout as passed when reward > 0.5.

`export_clawgym` writes any task in this layout; a "checks" verifier (the built-in suite's) becomes
reward/check.py plus a reward.sh that prints the checks as a JSON line and their mean last.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Any

from harnessrl.tasks.files import TaskDataReader, TaskLimits, write_tree
from harnessrl.tasks.model import CLAWGYM_MOUNT, Task, TaskError, Verifier, check_mount_dir

DATA_ENTRY = "data_entry.json"
REWARD_TIMEOUT_S = 120.0


def is_clawgym_dir(path: Path) -> bool:
    """Whether `path` looks like a ClawGym task (data_entry.json present, even as a link or a
    fifo: the loader then refuses it by name rather than skipping the task)."""
    return path.is_dir() and os.path.lexists(path / DATA_ENTRY)


def load_clawgym(path: Path, limits: TaskLimits | None = None) -> Task:
    """Load one ClawGym task directory; TaskError names the missing or malformed part
    (TaskDataError for links, special files, files over `limits` and text that is not UTF-8)."""
    with TaskDataReader(path, limits) as reader:
        entry = _data_entry(path, reader.read_text(DATA_ENTRY))
        reward_files = reader.read_tree("reward")
        input_files = reader.read_tree("input_files")
    if "reward.sh" not in reward_files:
        raise TaskError(f"{path}: reward/reward.sh is required by the ClawGym format")
    metadata = entry.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise TaskError(f"{path / DATA_ENTRY}: 'metadata' must be an object")
    mount = entry.get("input_mount_dir")
    mount_dir = CLAWGYM_MOUNT if mount in (None, "") else check_mount_dir(mount, str(path / DATA_ENTRY))
    return Task(
        id=entry["task_id"],
        instruction=entry["user_query"],
        files=input_files,
        verifier=Verifier(
            kind="reward_line", command="bash reward.sh", files=reward_files,
            dest="reward", workdir="reward", timeout_s=REWARD_TIMEOUT_S,
        ),
        category=str(metadata.get("category") or "clawgym"),
        split=str(metadata.get("split") or ""),
        pass_threshold=0.5,
        pass_rule=">",
        input_mount_dir=mount_dir,
        metadata=metadata,
        source=str(path),
    )


def _data_entry(path: Path, text: str) -> dict[str, Any]:
    """The parsed data_entry.json with its required fields checked."""
    try:
        entry = json.loads(text)
    except (ValueError, RecursionError) as e:  # JSONDecodeError, too many digits, nesting too deep
        raise TaskError(f"{path / DATA_ENTRY}: cannot read a JSON object ({type(e).__name__}: "
                        f"{str(e)[:200]})") from None
    if not isinstance(entry, dict):
        raise TaskError(f"{path / DATA_ENTRY}: expected a JSON object")
    for key in ("task_id", "user_query"):
        if not isinstance(entry.get(key), str) or not entry[key]:
            raise TaskError(f"{path / DATA_ENTRY}: missing string field {key!r}")
    return entry


def write_clawgym(task: Task, path: Path) -> Path:
    """Write a task in the ClawGym layout (its verifier must be a reward_line verifier)."""
    if task.verifier.kind != "reward_line":
        raise TaskError(f"task {task.id}: only reward_line verifiers have a ClawGym form")
    entry = {"task_id": task.id, "user_query": task.instruction,
             "input_mount_dir": task.input_mount_dir, "metadata": task.metadata}
    path.mkdir(parents=True, exist_ok=True)
    (path / DATA_ENTRY).write_text(json.dumps(entry, indent=2))
    write_tree(path / "input_files", task.files)
    write_tree(path / "reward", task.verifier.files)
    return path


# reward.sh of an exported "checks" task: check.py runs with the workspace (this folder's parent) as
# working directory; `python3 -I` keeps a planted json.py in the workspace off the import path.
CHECKS_REWARD_SH = """#!/usr/bin/env bash
# Exported by harnessrl: score the workspace with check.py; the last stdout line is the reward.
# ClawGym passes a rollout at reward > 0.5; this task passes at a score @RULE@ @THRESHOLD@, so the
# score s is written as 0.5 + s/2 when it passes and as s/2 when it does not (same order).
set -u
cd "$(dirname "$0")/.." || exit 1
checks=$(python3 reward/check.py) || exit 1
python3 -I -c '
import json, sys
checks = json.loads(sys.argv[1])
reward = checks.pop("reward", None)
print(json.dumps(checks))
s = float(reward) if reward is not None else sum(checks.values()) / len(checks)
passed = s @RULE@ @THRESHOLD@ - 1e-9 if "@RULE@" == ">=" else s @RULE@ @THRESHOLD@
print(max(0.5 + s / 2, 0.500001) if passed else min(s / 2, 0.5))
' "$checks"
"""


def checks_reward_sh(threshold: float, rule: str) -> str:
    """reward.sh of an exported "checks" task: its score, mapped so that ClawGym's pass rule
    (reward > 0.5) passes exactly the rollouts the task's own rule passes."""
    if rule not in (">", ">="):
        raise TaskError(f"pass rule must be > or >=, got {rule!r}")
    return CHECKS_REWARD_SH.replace("@RULE@", rule).replace("@THRESHOLD@", repr(float(threshold)))


_CHECKS_COMMAND = re.compile(r"python3 (?P<dest>[\w./-]+)/(?P<script>[\w.-]+\.py)")


def clawgym_form(task: Task) -> Task:
    """The task as a ClawGym directory holds it (what load_clawgym gives back): a reward_line
    verifier, ClawGym's pass rule (reward > 0.5), no family, variant or reference solution. A "checks"
    verifier run as `python3 <dest>/<script>` from the workspace becomes reward/check.py (its other
    files beside it) and CHECKS_REWARD_SH. The metadata keeps what the format has no field for
    (split, family, variant, the reference solution and the original pass threshold)."""
    v = task.verifier
    meta = {"category": task.category, "grading_type": "automated", **task.metadata, "split": task.split,
            "family": task.family, "variant": task.variant, "reference_solution": list(task.reference_solution),
            "pass_threshold": task.pass_threshold, "pass_rule": task.pass_rule}
    if v.kind == "reward_line":
        return _as_clawgym(task, v, meta)
    m = _CHECKS_COMMAND.fullmatch(v.command.strip())
    if not m or m["dest"] != v.dest or v.workdir or "reward.sh" in v.files or (
            m["script"] != "check.py" and "check.py" in v.files):
        raise TaskError(f"task {task.id}: no ClawGym form for the verifier command {v.command!r} (exported: "
                        "`python3 <dest>/<script>.py` run from the workspace)")
    files = {("check.py" if name == m["script"] else name): body for name, body in v.files.items()}
    files["reward.sh"] = checks_reward_sh(task.pass_threshold, task.pass_rule).encode()
    verifier = Verifier(kind="reward_line", command="bash reward.sh", files=files, dest="reward",
                        workdir="reward", timeout_s=REWARD_TIMEOUT_S)
    return _as_clawgym(task, verifier, meta)


def _as_clawgym(task: Task, verifier: Verifier, meta: dict[str, Any]) -> Task:
    return dataclasses.replace(task, verifier=verifier, metadata=meta, family="", variant=0, pass_threshold=0.5,
                               pass_rule=">", reference_solution=())


def export_clawgym(tasks: list[Task], out: Path) -> list[Path]:
    """Each task as a ClawGym task directory `out/<task id>/`; TaskError before writing anything
    when a task has no ClawGym form or its directory already exists."""
    forms = [clawgym_form(t) for t in tasks]
    taken = [t.id for t in forms if (out / t.id).exists()]
    if taken:
        raise TaskError(f"{out}: task directories already exist ({', '.join(taken[:5])}); export into a new "
                        "directory")
    return [write_clawgym(t, out / t.id) for t in forms]
