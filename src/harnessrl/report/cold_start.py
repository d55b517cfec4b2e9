"""The record of a run's cold start (config `cold_start`, run by sft/cold_start.py): the reference
demonstrations it collected and the fine-tuning on them, kept as <run_dir>/cold_start/cold_start.json
and shown in the run's report, so that the report reads base -> cold start -> RL."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

COLD_START_DIR = "cold_start"
RESULT_NAME = "cold_start.json"


@dataclass(frozen=True)
class ColdStart:
    policy_dir: str
    tasks: int
    rollouts: int
    passed: int
    passed_by_harness: dict[str, int]
    sft_trees: int
    nll_before: float
    nll_after: float
    demos_s: float
    sft_s: float


def cold_start_dir(run_dir: Path) -> Path:
    return Path(run_dir) / COLD_START_DIR


def read_cold_start(run_dir: Path) -> ColdStart | None:
    """The finished cold start of the run in `run_dir` (None: none, or not finished)."""
    path = cold_start_dir(run_dir) / RESULT_NAME
    if not path.is_file():
        return None
    return ColdStart(**json.loads(path.read_text()))


def write_cold_start(run_dir: Path, result: ColdStart) -> Path:
    """The record, written whole (a temporary file renamed): its presence marks the cold start done."""
    path = cold_start_dir(run_dir) / RESULT_NAME
    tmp = path.with_name(RESULT_NAME + ".tmp")
    tmp.write_text(json.dumps(asdict(result), indent=2))
    tmp.replace(path)
    return path


def cold_start_lines(run_dir: Path) -> list[str]:
    """The report's "Cold start" section (none without a cold start)."""
    done = read_cold_start(run_dir)
    if done is None:
        return []
    per_harness = ", ".join(f"{h} {n}" for h, n in done.passed_by_harness.items())
    return ["## Cold start", "",
            f"- reference demonstrations through the harnesses: {done.passed}/{done.rollouts} passed on "
            f"{done.tasks} tasks ({per_harness}), {done.demos_s:.0f}s",
            f"- SFT on the passing ones: {done.sft_trees} trees, mean NLL {done.nll_before:.3f} -> "
            f"{done.nll_after:.3f}, {done.sft_s:.0f}s",
            "- the baseline eval (before) measures this checkpoint, so the change is RL's alone", ""]
