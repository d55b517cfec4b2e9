"""The transfer matrix: every training run (row) evaluated through every harness and eval set
(column), from the eval rollouts the runs stored before (step 0) and after (their last eval step).

    harnessrl transfer runs/cc runs/codex runs/openclaw runs/mixed runs/whitebox --out runs/transfer

A cell is the change of held-out pass@1, after - before, with a paired 95% bootstrap interval over
the tasks evaluated at both steps (each task's pass rate before and after; the pass rule of
rollout/pass_at_k.py). A run's row is labelled by the harnesses it trained through (its stored
config). Writes transfer.md (the table), transfer.json and transfer.png (a heatmap of the changes).
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessrl.errors import HarnessRLError
from harnessrl.store.groups import drop_abandoned_attempts
from harnessrl.rollout.pass_at_k import bootstrap_interval
from harnessrl.store.records import rollout_passed
from harnessrl.rollout.plan import set_tag
from harnessrl.store.records import RolloutRecord

if TYPE_CHECKING:
    from harnessrl.store.run_store import RunStore

_EVAL_GROUP = re.compile(r"^eval-(?:(.+?)-)?s\d+-a\d+-")


class TransferError(HarnessRLError, ValueError):
    """A run holds no before/after eval to compare (the message names it and the fix)."""


@dataclass(frozen=True)
class Cell:
    before: float
    after: float
    change: float
    ci95: tuple[float, float]
    tasks: int
    rollouts_before: int
    rollouts_after: int


@dataclass(frozen=True)
class Row:
    label: str
    run_dir: str
    before_step: int
    after_step: int
    cells: dict[str, Cell]  # "<harness> · <set>" -> cell


def headline_set(config: dict[str, Any] | None) -> str:
    """The run's first eval set (its group ids carry no set label)."""
    return eval_set_names(config)[0]


def trained_label(config: dict[str, Any] | None, fallback: str) -> str:
    names = [h.get("name", "?") for h in ((config or {}).get("harnesses") or [])]
    return " + ".join(names) if names else fallback


def eval_set_names(config: dict[str, Any] | None) -> list[str]:
    """The run's eval set names, in order (an entry is a name or an EvalSet)."""
    tasks = (config or {}).get("tasks") or {}
    return [str(e["name"] if isinstance(e, dict) else e) for e in tasks.get("eval_sets") or [tasks.get("eval_split") or "test"]]


def eval_outcomes(rollouts: list[RolloutRecord], headline: str,
                  names: Sequence[str] = ()) -> dict[tuple[str, str], dict[int, dict[str, list[bool]]]]:
    """(harness, set) -> step -> task id -> pass of each eval rollout. A set's label in the group ids
    is its `set_tag` (rollout/plan.py): `names` maps it back."""
    by_tag = {set_tag(n): n for n in names}
    out: dict[tuple[str, str], dict[int, dict[str, list[bool]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for r in drop_abandoned_attempts(rollouts):
        m = _EVAL_GROUP.match(r.group_id)
        if m is None:
            continue
        name = by_tag.get(m[1], m[1]) if m[1] else headline
        out[(r.harness, name)][r.step][r.task_id].append(rollout_passed(r, None))
    return out


def cell(before: dict[str, list[bool]], after: dict[str, list[bool]]) -> Cell | None:
    """Paired over the tasks evaluated at both steps; None when there are none."""
    tasks = sorted(set(before) & set(after))
    if not tasks:
        return None
    b = [sum(before[t]) / len(before[t]) for t in tasks]
    a = [sum(after[t]) / len(after[t]) for t in tasks]
    deltas = [y - x for x, y in zip(b, a)]
    return Cell(before=sum(b) / len(b), after=sum(a) / len(a), change=sum(deltas) / len(deltas),
                ci95=bootstrap_interval(deltas), tasks=len(tasks),
                rollouts_before=sum(len(before[t]) for t in tasks), rollouts_after=sum(len(after[t]) for t in tasks))


Outcomes = dict[str, list[bool]]  # task -> pass of each eval rollout


def before_after(rollouts: list[RolloutRecord], config: dict[str, Any] | None
                 ) -> tuple[list[int], dict[tuple[str, str], tuple[Outcomes, Outcomes]]]:
    """(the eval steps, {(harness, set): (outcomes at step 0, outcomes at the last eval step)});
    the dict is empty without an eval before and after training."""
    outcomes = eval_outcomes(rollouts, headline_set(config), eval_set_names(config))
    steps = sorted({s for per_step in outcomes.values() for s in per_step})
    if 0 not in steps or len(steps) < 2:
        return steps, {}
    return steps, {key: (per_step.get(0, {}), per_step.get(steps[-1], {})) for key, per_step in outcomes.items()}


def run_row(store: RunStore, run_dir: Path) -> Row:
    config = store.get_meta("config")
    steps, pairs = before_after(store.list_rollouts(), config)
    if not pairs:
        raise TransferError(f"{run_dir} has no eval before and after training (eval steps: {steps or 'none'}). "
                            "Fix: train with loop.eval_size > 0, or evaluate its checkpoint with `harnessrl eval`")
    cells = {}
    for (harness, name), (b, a) in sorted(pairs.items()):
        c = cell(b, a)
        if c is not None:
            cells[f"{harness} · {name}"] = c
    return Row(trained_label(config, run_dir.name), str(run_dir), 0, steps[-1], cells)


def distinct_labels(rows: list[Row]) -> list[Row]:
    """Rows that share a label (two runs through the same harnesses, e.g. RL alone and RL after a
    cold start) are told apart by their run directory's name."""
    labels = [r.label for r in rows]
    return [replace(r, label=f"{r.label} · {Path(r.run_dir).name}") if labels.count(r.label) > 1 else r
            for r in rows]


def matrix_markdown(rows: list[Row]) -> str:
    columns = list(dict.fromkeys(k for r in rows for k in r.cells))
    lines = ["| trained through | " + " | ".join(columns) + " |", "|---|" + "---:|" * len(columns)]
    for r in rows:
        parts = []
        for k in columns:
            c = r.cells.get(k)
            parts.append("-" if c is None else
                         f"{100 * c.before:.0f} -> {100 * c.after:.0f} ({100 * c.change:+.1f} "
                         f"[{100 * c.ci95[0]:+.1f}, {100 * c.ci95[1]:+.1f}], {c.tasks} tasks)")
        lines.append(f"| {r.label} | " + " | ".join(parts) + " |")
    return "\n".join(lines) + "\n"


def write_heatmap(rows: list[Row], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    columns = list(dict.fromkeys(k for r in rows for k in r.cells))
    grid = np.array([[100 * r.cells[k].change if k in r.cells else np.nan for k in columns] for r in rows])
    fig, ax = plt.subplots(figsize=(1.6 + 1.3 * len(columns), 1.2 + 0.6 * len(rows)))
    bound = max(float(np.nanmax(np.abs(grid))) if np.isfinite(grid).any() else 1.0, 1.0)
    im = ax.imshow(grid, cmap="RdBu", vmin=-bound, vmax=bound, aspect="auto")
    ax.set_xticks(range(len(columns)), [c.replace(" · ", "\n") for c in columns], fontsize=8)
    ax.set_yticks(range(len(rows)), [r.label for r in rows], fontsize=8)
    for i in range(len(rows)):
        for j in range(len(columns)):
            if np.isfinite(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:+.0f}", ha="center", va="center", fontsize=8)
    ax.set_title("held-out pass@1 change (points), trained through (rows) x evaluated through (columns)", fontsize=9)
    fig.colorbar(im, ax=ax, label="points")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_transfer(run_dirs: list[Path], out_dir: Path) -> list[Row]:
    """Read every run, write transfer.md / .json / .png into `out_dir`; returns the rows."""
    from harnessrl.store.run_store import RunStore
    from harnessrl.store.schema import DB_NAME

    rows = []
    for run_dir in run_dirs:
        if not (Path(run_dir) / DB_NAME).is_file():
            raise TransferError(f"{run_dir} holds no run (no {DB_NAME})")
        store = RunStore(run_dir)
        try:
            rows.append(run_row(store, Path(run_dir)))
        finally:
            store.close()
    rows = distinct_labels(rows)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "transfer.md").write_text(matrix_markdown(rows))
    (out_dir / "transfer.json").write_text(json.dumps([asdict(r) for r in rows], indent=2))
    write_heatmap(rows, out_dir / "transfer.png")
    return rows
