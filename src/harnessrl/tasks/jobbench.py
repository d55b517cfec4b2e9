"""JobBench (Hugging Face dataset `JobBench/job-bench`): white-collar jobs across 35 occupations,
each a workspace of reference files and a weighted rubric, as harnessrl tasks.

The published data, downloaded as it is (MIT license):

    ROOT/
      tasks.parquet, easy.parquet        one row per task (the same content as the folders)
      dataset/<occupation>/taskN/        the main split (65 tasks)
      dataset_easy/<occupation>/taskN/   the easy split (63 tasks)
        RUBRICS.json                     {"rubrics": [{"rubric", "weight", "criterion": [...]}, ...]}
        task_card.md                     a human-readable brief (not shown to the agent)
        task_folder/TASK_INSTRUCTIONS.txt, ...   the prompt and the starting files
        files_required_to_search/        main split: material the agent is meant to find by search

    huggingface-cli download JobBench/job-bench --repo-type dataset --local-dir ROOT

One task per task folder: the workspace holds the files of task_folder/ as published
(TASK_INSTRUCTIONS.txt included) and, with `include_search` (the default: a sandbox has no web
search), files_required_to_search/ under that name. The verifier is `jobbench_grade.py`, which grades the
rubric's fact anchors deterministically (see its docstring: a lower bound of a judge's grade,
never above it); the rubric stays in the verifier's files, unseen by the agent. JobBench ships no
reference solution, so the conformance check is that the untouched workspace scores 0.

`python -m harnessrl.tasks.jobbench ROOT OUT [--split main|easy]` writes the tasks as native task
directories that `--tasks OUT` loads.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from harnessrl.tasks.files import TaskDataReader, TaskLimits
from harnessrl.tasks.jobbench_grade import file_text, item_anchors, line_key, rubric_items
from harnessrl.tasks.model import Task, TaskError, Verifier

SPLITS = {"main": "dataset", "easy": "dataset_easy"}
RUBRICS = "RUBRICS.json"
PROMPT_FILE = "TASK_INSTRUCTIONS.txt"
INSTRUCTIONS = f"task_folder/{PROMPT_FILE}"
SEARCH = "files_required_to_search"
GRADER = "jobbench_grade.py"
MAX_LINES = 500_000  # starting-file lines whose hashes the grader gets (a bound on inputs.json)
DOWNLOAD = "huggingface-cli download JobBench/job-bench --repo-type dataset --local-dir ROOT"
_TASK_DIR = re.compile(r"task(\d+)")

NOTE = ("\n\nThe task's files are in your working directory (these instructions are also in "
        "TASK_INSTRUCTIONS.txt{search}). Save every deliverable as a file in your working directory.")
SEARCH_NOTE = "; what you would otherwise have to search for is in files_required_to_search/"


def is_jobbench_task(path: Path) -> bool:
    return (path / RUBRICS).is_file() and (path / INSTRUCTIONS).is_file()


def task_dirs(root: Path, split: str = "main") -> list[Path]:
    """The task directories under a downloaded JobBench directory (ROOT, a split folder, an
    occupation folder or one task); TaskError with the download command when there are none."""
    if split not in SPLITS:
        raise TaskError(f"JobBench split must be one of {', '.join(SPLITS)}, got {split!r}")
    if is_jobbench_task(root):
        return [root]
    base = root / SPLITS[split] if (root / SPLITS[split]).is_dir() else root
    found = sorted(p.parent for p in base.glob(f"*/*/{RUBRICS}") if is_jobbench_task(p.parent))
    found += sorted(p.parent for p in base.glob(f"*/{RUBRICS}") if is_jobbench_task(p.parent))
    if not found:
        raise TaskError(f"{root}: no JobBench task folders (<occupation>/taskN/ with {RUBRICS} and {INSTRUCTIONS}) "
                        f"in the {split} split; download the data with: {DOWNLOAD}")
    return found


def load_jobbench(root: str | Path, split: str = "main", include_search: bool = True,
                  limits: TaskLimits | None = None) -> list[Task]:
    """JobBench's tasks of one split as harnessrl tasks (see the module docstring)."""
    grader = Path(__file__).with_name(GRADER).read_bytes()
    tasks = [load_jobbench_task(p, split, include_search, grader, limits) for p in task_dirs(Path(root), split)]
    ids = [t.id for t in tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise TaskError(f"{root}: duplicate JobBench task ids {dupes}")
    return tasks


def load_jobbench_task(path: Path, split: str = "main", include_search: bool = True, grader: bytes | None = None,
                       limits: TaskLimits | None = None) -> Task:
    """One JobBench task folder; TaskError names a malformed RUBRICS.json or a missing part."""
    with TaskDataReader(path, limits) as reader:
        rubric_bytes = reader.read_file(RUBRICS)
        files = reader.read_tree("task_folder")
        search = include_search and reader.exists(SEARCH)
        if search:
            files.update({f"{SEARCH}/{k}": v for k, v in reader.read_tree(SEARCH).items()})
    items = _rubric(path, rubric_bytes)
    prompt = files[PROMPT_FILE].decode("utf-8", errors="replace").strip()
    if not prompt:
        raise TaskError(f"{path / INSTRUCTIONS}: empty")
    occupation, num = path.parent.name, _task_num(path)
    weights = [float(i.get("weight", 1) or 0) for i in items]
    anchored = sum(w for i, w in zip(items, weights) if w > 0 and any(item_anchors(i)))
    positive = sum(w for w in weights if w > 0)
    return Task(
        id=f"jobbench-{occupation}__task{num}",
        instruction=prompt + NOTE.format(search=SEARCH_NOTE if search else ""),
        files=files,
        verifier=Verifier(kind="checks", command=f"python3 -I .verifier/{GRADER}", timeout_s=120.0,
                          files={GRADER: grader or Path(__file__).with_name(GRADER).read_bytes(),
                                 "rubrics.json": rubric_bytes, "inputs.json": _inputs(files)}),
        category="jobbench",
        split="test",
        family=occupation,
        variant=num,
        pass_threshold=0.5,
        metadata={"benchmark": "jobbench", "occupation": occupation, "task_num": num, "jobbench_split": split,
                  "criteria": len(items), "anchored_weight_share": round(anchored / positive, 4) if positive else 0.0},
        source=str(path),
    )


def _rubric(path: Path, data: bytes) -> list[dict[str, Any]]:
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise TaskError(f"{path / RUBRICS}: not JSON ({type(e).__name__}: {str(e)[:200]})") from None
    items = rubric_items(doc)
    if not items:
        raise TaskError(f"{path / RUBRICS}: expected {{\"rubrics\": [{{\"rubric\", \"weight\", \"criterion\"}}, ...]}}")
    for n, item in enumerate(items, start=1):
        if not isinstance(item.get("rubric"), str) or not isinstance(item.get("weight", 1), (int, float)):
            raise TaskError(f"{path / RUBRICS}: criterion {n} needs a 'rubric' string and a numeric 'weight'")
    return items


def _task_num(path: Path) -> int:
    m = _TASK_DIR.fullmatch(path.name)
    if not m:
        raise TaskError(f"{path}: a JobBench task folder is named taskN")
    return int(m.group(1))


def _inputs(files: dict[str, bytes]) -> bytes:
    """What the grader must not count as the agent's work: the starting files' hashes and lines."""
    lines: dict[str, None] = {}
    for name, body in files.items():
        for line in file_text(name, body).splitlines():
            if len(lines) >= MAX_LINES:
                break
            if line.strip():
                lines[line_key(line)] = None
    return json.dumps({"files": sorted({hashlib.sha256(b).hexdigest() for b in files.values()}),
                       "lines": list(lines)}).encode()


def export_jobbench(root: str | Path, out: str | Path, split: str = "main", include_search: bool = True,
                    limit: int | None = None, limits: TaskLimits | None = None) -> list[Path]:
    """Write JobBench's tasks as native task directories `out/<task id>/` (TaskError before
    writing anything when `out` already holds one of them). Loading them back (`--tasks OUT`) reads
    within the default TaskLimits: a task exported past them needs the same limits to load."""
    from harnessrl.tasks.native import write_native

    tasks = load_jobbench(root, split, include_search, limits)[:limit]
    out = Path(out)
    taken = [t.id for t in tasks if (out / t.id).exists()]
    if taken:
        raise TaskError(f"{out}: task directories already exist ({', '.join(taken[:5])}); export into a new directory")
    return [write_native(t, out / t.id) for t in tasks]


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m harnessrl.tasks.jobbench",
                                description="Write JobBench tasks as harnessrl task directories.")
    p.add_argument("root", help="the downloaded JobBench/job-bench dataset directory")
    p.add_argument("out", help="where to write one task directory per task")
    p.add_argument("--split", choices=sorted(SPLITS), default="main")
    p.add_argument("--no-search-files", action="store_true", help="leave files_required_to_search/ out")
    p.add_argument("--limit", type=int, default=None, help="at most this many tasks")
    args = p.parse_args(argv)
    try:
        written = export_jobbench(args.root, args.out, args.split, not args.no_search_files, args.limit)
    except TaskError as e:
        print(f"error: {e}")
        return 2
    print(f"wrote {len(written)} JobBench task directories to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
