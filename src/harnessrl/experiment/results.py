"""The results of `harnessrl experiment` (experiment/arms.py): each arm's held-out change over seeds.

For every arm, seed and eval cell (harness · set, and all cells pooled when there are several), the
pairs come from the run's own store as `transfer.before_after` reads them: step 0 (the seed's shared
baseline eval, copied into the run) and the last eval step. A task's change is its pass rate after
minus before. The arm's change is the mean over seeds of each seed's mean over tasks, with a 95%
hierarchical bootstrap interval (experiment/seed_bootstrap.py: seeds resampled, then tasks within each seed).
"vs <reference>" is the same statistic of the per-task difference between an arm's change and the
reference arm's at the same seed: the seed's baseline cancels, so it is paired by seed and task.

Writes experiment.md (the table, and what each arm's training cost: informative groups, trained
tokens, wall time, mismatch KL, from the runs' step records), experiment.json and experiment.png (the
changes with their intervals and each seed's change as a dot) into the experiment directory.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from harnessrl.report.heldout import _pooled
from harnessrl.experiment.seed_bootstrap import SeedInterval, hierarchical_interval
from harnessrl.report.transfer import Outcomes, before_after

POOLED = "all harnesses · all sets"
Training = dict[str, dict[int, dict[str, float]]]  # arm -> seed -> run_training(...)
# (step-record key, how a run's steps combine, table header, format)
TRAINING_COLUMNS: tuple[tuple[str, Callable[[list[float]], float], str, str], ...] = (
    ("informative_groups", statistics.fmean, "informative groups", "{:.0%}"),
    ("budget.tokens_sampled", statistics.fmean, "sampled tokens / step", "{:,.0f}"),
    ("budget.tokens_replayed", statistics.fmean, "replayed tokens / step", "{:,.0f}"),
    ("budget.rollouts_per_group", statistics.fmean, "rollouts / group", "{:.1f}"),
    ("branch_mixed", statistics.fmean, "branch points with mixed outcomes", "{:.0%}"),
    ("branch_points", statistics.fmean, "branch points / step", "{:.1f}"),
    ("tokens_trained", statistics.fmean, "trained tokens / step", "{:,.0f}"),
    ("wall_s", sum, "training wall (s)", "{:,.0f}"),
    ("mismatch_kl", max, "max mismatch KL", "{:.4f}"))
Pair = tuple[Outcomes, Outcomes]  # (task -> passes at step 0, task -> passes at the last eval step)
ArmOutcomes = dict[str, dict[int, dict[str, Pair]]]  # arm -> seed -> cell label -> pair


@dataclass(frozen=True)
class ArmResult:
    arm: str
    cell: str  # "<harness> · <set>", or POOLED
    before: float  # pass@1, the mean over seeds of each seed's mean over tasks
    after: float
    change: SeedInterval
    versus: SeedInterval | None  # against the reference arm (None for the reference itself)
    per_seed: dict[int, float]  # each seed's change (mean over its tasks)
    tasks: int  # tasks per seed (the most any seed had)


def run_pairs(run_dir: Path) -> dict[str, Pair]:
    """cell label -> (before, after) outcomes of one finished run; the pooled cell when there are several."""
    from harnessrl.store.run_store import RunStore

    store = RunStore(run_dir)
    try:
        _, found = before_after(store.list_rollouts(), store.get_meta("config"))
    finally:
        store.close()
    pairs = {f"{h} · {name}": pair for (h, name), pair in sorted(found.items())}
    if len(found) > 1:
        keys = sorted(found)
        pairs[POOLED] = _pooled([found[k] for k in keys], keys)
    return pairs


def run_training(steps: list[tuple[int, dict[str, Any]]]) -> dict[str, float]:
    """What one run's training steps (step > 0) cost: the mean informative share and trained tokens per
    step, the summed step wall time and the largest mismatch KL; a key no step recorded is left out."""
    rows = [m for s, m in steps if s > 0]

    def values(key: str) -> list[float]:  # "part.key": a figure inside a part of the record
        got = [m.get(key) if "." not in key else (m.get(key.split(".")[0]) or {}).get(key.split(".")[1]) for m in rows]
        return [float(v) for v in got if isinstance(v, (int, float))]

    return {key: float(combine(v)) for key, combine, _, _ in TRAINING_COLUMNS if (v := values(key))}


def training_markdown(training: Training) -> list[str]:
    """The per-arm table of `run_training` figures, each the mean over the arm's seeds."""
    arms = {a: per_seed for a, per_seed in training.items() if per_seed}
    if not arms:
        return []
    lines = ["", "What each arm's training cost (steps after the baseline eval; each figure the mean over "
                 "the arm's seeds of the run's mean per step, its summed step wall time with its evals, "
                 "its largest mismatch KL):",
             "", "| arm | seeds | " + " | ".join(c[2] for c in TRAINING_COLUMNS) + " |",
             "|---|---:|" + "---:|" * len(TRAINING_COLUMNS)]
    for arm, per_seed in arms.items():
        cells = []
        for key, _, _, fmt in TRAINING_COLUMNS:
            v = [run[key] for run in per_seed.values() if key in run]
            cells.append(fmt.format(sum(v) / len(v)) if v else "-")
        lines.append(f"| {arm} | {len(per_seed)} | " + " | ".join(cells) + " |")
    return lines


def task_changes(pair: Pair) -> tuple[dict[str, float], float, float]:
    """({task: after rate - before rate} over the tasks evaluated at both steps, mean before, mean after)."""
    before, after = pair
    tasks = sorted(set(before) & set(after))
    b = {t: sum(before[t]) / len(before[t]) for t in tasks}
    a = {t: sum(after[t]) / len(after[t]) for t in tasks}
    n = max(len(tasks), 1)
    return {t: a[t] - b[t] for t in tasks}, sum(b.values()) / n, sum(a.values()) / n


def analyse(outcomes: ArmOutcomes, reference: str, resamples: int = 10_000) -> list[ArmResult]:
    """One result per arm and cell that some seed evaluated, in arm order, then cell order."""
    ref = outcomes.get(reference, {})
    results = []
    for arm, per_seed in outcomes.items():
        cells = list(dict.fromkeys(c for pairs in per_seed.values() for c in pairs))
        for label in cells:
            seeds = sorted(s for s, pairs in per_seed.items() if label in pairs)
            changes = {s: task_changes(per_seed[s][label]) for s in seeds}
            changes = {s: c for s, c in changes.items() if c[0]}
            if not changes:
                continue
            change = hierarchical_interval([list(c[0].values()) for c in changes.values()], resamples=resamples)
            versus = None
            if arm != reference:
                diffs = []
                for s, (deltas, _, _) in changes.items():
                    if label in ref.get(s, {}):
                        ref_deltas = task_changes(ref[s][label])[0]
                        common = sorted(set(deltas) & set(ref_deltas))
                        if common:
                            diffs.append([deltas[t] - ref_deltas[t] for t in common])
                versus = hierarchical_interval(diffs, resamples=resamples) if diffs else None
            results.append(ArmResult(
                arm=arm, cell=label, before=sum(c[1] for c in changes.values()) / len(changes),
                after=sum(c[2] for c in changes.values()) / len(changes), change=change, versus=versus,
                per_seed={s: sum(c[0].values()) / len(c[0]) for s, c in changes.items()},
                tasks=max(len(c[0]) for c in changes.values())))
    return results


def _pts(x: SeedInterval | None) -> str:
    if x is None:
        return "-"
    text = f"{100 * x.mean:+.1f} [{100 * x.ci95[0]:+.1f}, {100 * x.ci95[1]:+.1f}]"
    return f"**{text}**" if x.excludes_zero() else text


def results_markdown(results: list[ArmResult], reference: str, title: str, missing: list[str],
                     training: Training | None = None) -> str:
    seeds = sorted({s for r in results for s in r.per_seed})
    lines = [f"# {title}", "",
             f"Held-out pass@1 change (after - before, points) of each arm: the mean over seeds of each "
             f"seed's mean over tasks, with a 95% hierarchical bootstrap interval (seeds resampled, then "
             f"tasks within each seed). Before is each seed's baseline eval of the base policy, shared "
             f"by every arm of that seed; \"vs {reference}\" is the paired difference of the changes "
             f"(same seed, same tasks). Bold: the interval excludes 0. Seeds: {', '.join(map(str, seeds)) or '-'}.",
             "", f"| arm | harness · set | before | after | change [95% CI] | vs {reference} [95% CI] | seeds | "
                 "tasks | change per seed |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        per_seed = ", ".join(f"{100 * v:+.1f}" for _, v in sorted(r.per_seed.items()))
        lines.append(f"| {r.arm} | {r.cell} | {100 * r.before:.1f}% | {100 * r.after:.1f}% | {_pts(r.change)} | "
                     f"{'-' if r.arm == reference else _pts(r.versus)} | {r.change.seeds} | {r.tasks} | {per_seed} |")
    lines += training_markdown(training or {})
    if missing:
        lines += ["", f"Not finished (left out): {', '.join(missing)}. Run the same command again to finish them."]
    return "\n".join(lines) + "\n"


def write_plot(results: list[ArmResult], path: Path, title: str) -> None:
    """One panel per cell: each arm's change with its interval, and each seed's change as a dot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = list(dict.fromkeys(r.cell for r in results))
    arms = list(dict.fromkeys(r.arm for r in results))
    fig, axes = plt.subplots(1, max(len(cells), 1), figsize=(1.5 + 1.2 * len(arms) * max(len(cells), 1), 3.6),
                             squeeze=False)
    for ax, cell in zip(axes[0], cells):
        for i, arm in enumerate(arms):
            r = next((x for x in results if x.arm == arm and x.cell == cell), None)
            if r is None:
                continue
            lo, hi = 100 * r.change.ci95[0], 100 * r.change.ci95[1]
            ax.errorbar([i], [100 * r.change.mean], yerr=[[100 * r.change.mean - lo], [hi - 100 * r.change.mean]],
                        fmt="o", color="C0", capsize=4)
            seeds = sorted(r.per_seed)
            xs = [i + 0.12 + 0.06 * (j - (len(seeds) - 1) / 2) for j in range(len(seeds))]
            ax.scatter(xs, [100 * r.per_seed[s] for s in seeds], s=12, color="C1", zorder=3)
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_xticks(range(len(arms)), arms, fontsize=8)
        ax.set_title(cell, fontsize=9)
        ax.set_ylabel("held-out pass@1 change (points)", fontsize=8)
    fig.suptitle(f"{title}: mean over seeds, 95% hierarchical bootstrap; dots: each seed", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_results(out: Path, outcomes: ArmOutcomes, reference: str, missing: list[str],
                  resamples: int = 10_000, training: Training | None = None) -> list[ArmResult]:
    """Analyse and write experiment.md / .json / .png into `out`; returns the results."""
    results = analyse(outcomes, reference, resamples)
    title = f"experiment {Path(out).name}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "experiment.md").write_text(results_markdown(results, reference, title, missing, training))
    payload: dict[str, Any] = {"reference": reference, "missing": missing, "results": [asdict(r) for r in results],
                               "training": training or {}}
    (out / "experiment.json").write_text(json.dumps(payload, indent=2))
    if results:
        write_plot(results, out / "experiment.png", title)
    return results
