"""One entry point for every task source: `load_tasks("builtin:test")`, a task directory, or a
directory of task directories (ClawGym or native, mixed freely)."""

from __future__ import annotations

import os
from pathlib import Path

from harnessrl.tasks.clawgym import is_clawgym_dir, load_clawgym
from harnessrl.tasks.files import TaskLimits
from harnessrl.tasks.harbor import is_harbor_dir, load_harbor
from harnessrl.tasks.model import Task, TaskDataError, TaskError
from harnessrl.tasks.native import is_native_dir, load_native


def load_task_dir(path: Path, limits: TaskLimits | None = None) -> Task:
    """One task directory (ClawGym, Harbor or native), read within `limits` (default: files.TaskLimits())."""
    if is_harbor_dir(path):  # before native: a Harbor task also has a task.toml
        return load_harbor(path, limits)
    if is_clawgym_dir(path):
        return load_clawgym(path, limits)
    if is_native_dir(path):
        return load_native(path, limits)
    raise TaskError(f"{path} is not a task directory (needs data_entry.json or task.toml)")


def load_tasks(spec: str | Path, limits: TaskLimits | None = None) -> list[Task]:
    """Tasks for a selector (builtin:...) or a path; TaskError with the fix when nothing matches.
    Task data is read within `limits` (per file, per task); links and special files are refused."""
    text = str(spec)
    if text.startswith("builtin:"):
        from harnessrl.tasks.suite import select_builtin

        return select_builtin(text)
    benchmark = _benchmark_tasks(text, limits)
    if benchmark is not None:
        return benchmark
    path = Path(text)
    if not path.exists():
        raise TaskError(f"{text!r} does not exist; pass a task directory (or a directory of them), a "
                        "builtin:<selector> or an officeqa:/jobbench: selector")
    if not path.is_dir():
        raise TaskError(f"{text!r} is neither a builtin:<selector>, an officeqa:/jobbench: selector nor a directory")
    if is_clawgym_dir(path) or is_native_dir(path):
        return [load_task_dir(path, limits)]
    tasks = [load_task_dir(p, limits) for p in _task_dirs(path)]
    if not tasks:
        raise TaskError(f"{path} holds no task directories (subdirectories with data_entry.json or "
                        "task.toml)")
    ids = [t.id for t in tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise TaskError(f"{path}: duplicate task ids {dupes}")
    return tasks


BENCHMARK_SUBSETS = {"officeqa": ("pro", "full"), "jobbench": ("main", "easy")}


def _benchmark_tasks(text: str, limits: TaskLimits | None) -> list[Task] | None:
    """`officeqa:ROOT[:pro|full]` and `jobbench:ROOT[:main|easy]`: a downloaded benchmark read in its
    published layout (tasks/officeqa.py, tasks/jobbench.py); None for any other spec."""
    name, sep, rest = text.partition(":")
    if not sep or name not in BENCHMARK_SUBSETS:
        return None
    root, sep, subset = rest.rpartition(":")
    if not sep or subset not in BENCHMARK_SUBSETS[name]:
        root, subset = rest, BENCHMARK_SUBSETS[name][0]
    if not root or not Path(root).is_dir():
        raise TaskError(f"{text!r}: {root or '(empty)'} is not a directory. Fix: download the benchmark "
                        f"(docs/tasks.md, \"The method's benchmarks\") and name its directory: {name}:ROOT"
                        f"[:{'|'.join(BENCHMARK_SUBSETS[name])}]")
    if name == "officeqa":
        from harnessrl.tasks.officeqa import load_officeqa

        return load_officeqa(root, subset=subset, limits=limits)
    from harnessrl.tasks.jobbench import load_jobbench

    return load_jobbench(root, split=subset, limits=limits)


def _task_dirs(path: Path) -> list[Path]:
    """The task directories in a directory of tasks; a link to a directory is refused by name (it
    would pull in a directory from elsewhere on the host), other entries are skipped."""
    out = []
    for p in sorted(path.iterdir()):
        if p.is_symlink() and p.is_dir():
            raise TaskDataError(f"{p}: is a symbolic link (to {os.readlink(p)!r}); a directory of tasks may "
                                "hold task directories, not links to them: copy or move the task there")
        if is_clawgym_dir(p) or is_native_dir(p):
            out.append(p)
    return out


def interleave_families(tasks: list[Task]) -> list[Task]:
    """One task per family in turn (order kept within a family), so that the first k tasks of a
    held-out set cover many families."""
    by_family: dict[str, list[Task]] = {}
    for t in tasks:
        by_family.setdefault(t.family or t.category, []).append(t)
    out, queues = [], list(by_family.values())
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out
