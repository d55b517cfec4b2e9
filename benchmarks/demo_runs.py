"""`make demo` as a distribution: several finished demo runs summarised per harness and eval set.

For each row of the closing change table (report/heldout.py: per harness and set, then pooled), it
prints the median change over the runs, their range, how many runs had a change > 0 and how many
had a paired 95% interval that excludes 0, then each run's figure. It also prints each run's wall
time, informative-group fraction and last mismatch KL when the metrics have them. A README figure is
this table's median and range, never one run.

    .venv/bin/python benchmarks/demo_runs.py RUN_DIR [RUN_DIR ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from harnessrl.report.heldout import held_out_changes  # noqa: E402
from harnessrl.report.run_report import kl_text  # noqa: E402
from harnessrl.experiment.seed_bootstrap import ZERO_TOLERANCE, interval_excludes_zero  # noqa: E402
from harnessrl.report.transfer import Cell  # noqa: E402
from harnessrl.store import RunStore  # noqa: E402


def run_changes(run_dir: Path) -> dict[str, Cell]:
    store = RunStore(run_dir)
    try:
        return dict(held_out_changes(store.list_rollouts(), store.get_meta("config")))
    finally:
        store.close()


def run_facts(run_dir: Path) -> dict[str, float | None]:
    """Wall seconds of the run's steps, informative-group fraction (mean and worst step), max mismatch KL."""
    path = run_dir / "metrics.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []
    wall = sum(float(r.get("wall_s") or 0.0) for r in rows) or None
    informative = [r["informative_groups"] for r in rows if isinstance(r.get("informative_groups"), (int, float))]
    kls = [r["mismatch_kl"] for r in rows if isinstance(r.get("mismatch_kl"), (int, float))]
    return {"wall_s": wall, "informative": statistics.mean(informative) if informative else None,
            "informative_min": min(informative) if informative else None, "max_kl": max(kls) if kls else None}


def excludes_zero(c: Cell) -> bool:
    return interval_excludes_zero(c.ci95)


def table(runs: dict[str, dict[str, Cell]]) -> list[str]:
    labels = list(dict.fromkeys(label for cells in runs.values() for label in cells))
    n = len(runs)
    lines = ["| harness · set | median change (pts) | range | > 0 | CI excludes 0 | each run |",
             "|---|---:|---:|---:|---:|---|"]
    for label in labels:
        cells = [cells[label] for cells in runs.values() if label in cells]
        changes = [0.0 if abs(c.change) < ZERO_TOLERANCE else 100 * c.change for c in cells]
        lines.append(f"| {label} | {statistics.median(changes):+.1f} | {min(changes):+.1f} to {max(changes):+.1f} "
                     f"| {sum(x > 0 for x in changes)}/{len(cells)} | {sum(excludes_zero(c) for c in cells)}/{len(cells)} "
                     f"| " + ", ".join(f"{100 * c.change:+.1f} [{100 * c.ci95[0]:+.1f}, {100 * c.ci95[1]:+.1f}]"
                                      for c in cells) + " |")
    return [f"{n} runs", ""] + lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dirs", nargs="+", type=Path)
    args = ap.parse_args()
    runs: dict[str, dict[str, Cell]] = {}
    for d in args.run_dirs:
        cells = run_changes(d)
        if not cells:
            print(f"{d}: no eval before and after training: left out", file=sys.stderr)
            continue
        runs[str(d)] = cells
    if not runs:
        sys.exit("no finished demo run among the directories given")
    print("\n".join(table(runs)))
    print("\n| run | steps wall | informative groups (mean) | worst step | max mismatch KL |\n|---|---:|---:|---:|---:|")
    for d in runs:
        f = run_facts(Path(d))
        wall = "-" if f["wall_s"] is None else f"{f['wall_s'] / 60:.1f} min"
        inf = "-" if f["informative"] is None else f"{100 * f['informative']:.0f}%"
        worst = "-" if f["informative_min"] is None else f"{100 * f['informative_min']:.0f}%"
        kl = kl_text(f["max_kl"])  # a rounding residue below 0 is 0.0000, never "-0.0000"
        print(f"| {Path(d).name} | {wall} | {inf} | {worst} | {kl} |")


if __name__ == "__main__":
    main()
