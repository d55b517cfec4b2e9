"""Why a tree arm does or does not beat flat GRPO, read from finished runs: where the outcome of a
rollout is decided, and what the branches added.

Per arm of an experiment directory (runs/experiments/NAME/ARM/seed-N, each a run directory with its
harnessrl.sqlite; opened read-only), over the training groups of every seed and step:

- groups: the group's fresh samples (branches aside) all failed, all passed or were mixed, and the
  share that is informative once the branches are counted in (what the update can learn from);
- the chance that n fresh samples at the arm's own pass rate p all fail, (1 - p)^n, the floor on
  uninformative groups that fewer fresh samples raise;
- branch points: the call index they were placed at, the parent's outcome, the branches' pass rate
  given the parent passed or failed (a branch that copies its parent's outcome means the outcome
  was settled before the point), next to the pass rate of the group's other fresh samples (the
  parent aside) at the same points: when the two match, a branch is no more than a fresh sample of
  the task, and what settles the outcome is the task (for this policy), not the replayed prefix; and
  the share of points with mixed outcomes (the target is >= 1/2);
- per seed and step, the served calls cut at max_tokens (a degenerate repetition shows here first).

    .venv/bin/python benchmarks/branch_outcomes.py runs/experiments/multistep_flat_vs_tree [--arms flat,tree]

Prints one markdown table per question; nothing is written.
"""

from __future__ import annotations

import argparse
import collections
import statistics
from pathlib import Path

from harnessrl.rollout.branching import point_outcomes
from harnessrl.rollout.groups import counted
from harnessrl.store.records import RolloutRecord, rollout_passed, served_calls
from harnessrl.store.run_store import RunStore


def arm_runs(root: Path, arms: list[str] | None) -> dict[str, list[Path]]:
    """{arm: its finished seed run directories}, the baseline evals left out."""
    out: dict[str, list[Path]] = {}
    for arm_dir in sorted(p for p in root.iterdir() if p.is_dir() and p.name != "baseline"):
        if arms and arm_dir.name not in arms:
            continue
        runs = sorted(p for p in arm_dir.glob("seed-*") if (p / "harnessrl.sqlite").exists())
        if runs:
            out[arm_dir.name] = runs
    return out


def training_groups(run: Path) -> tuple[list[list[RolloutRecord]], dict[int, tuple[int, int]]]:
    """The run's training groups (step >= 1, split train), each its rollouts, branches included;
    and per step (served calls, of them cut at max_tokens: finish_reason "length")."""
    with RunStore(run) as store:
        rollouts = [r for r in store.list_rollouts() if r.step >= 1 and r.split == "train"]
        calls = {r.rollout_id: served_calls(store.list_calls([r.rollout_id])) for r in rollouts}
    groups: dict[str, list[RolloutRecord]] = collections.defaultdict(list)
    cut: dict[int, tuple[int, int]] = {}
    for r in rollouts:
        groups[r.group_id].append(r)
        n, k = cut.get(r.step, (0, 0))
        cut[r.step] = (n + len(calls[r.rollout_id]), k + sum(c.finish_reason == "length" for c in calls[r.rollout_id]))
    return list(groups.values()), cut


def passed(r: RolloutRecord) -> bool:
    return rollout_passed(r, None)


def group_figures(groups: list[list[RolloutRecord]]) -> dict[str, float]:
    kinds: collections.Counter[str] = collections.Counter()
    fresh_n: list[int] = []
    fresh_pass: list[float] = []
    informative = 0
    for g in groups:
        fresh = counted(g, fresh_only=True)
        if not fresh:
            continue
        outcomes = {passed(r) for r in fresh}
        kinds["mixed" if len(outcomes) > 1 else "all pass" if True in outcomes else "all fail"] += 1
        fresh_n.append(len(fresh))
        fresh_pass += [float(passed(r)) for r in fresh]
        informative += len({passed(r) for r in counted(g)}) > 1
    n = sum(kinds.values()) or 1
    p = statistics.fmean(fresh_pass) if fresh_pass else 0.0
    k = round(statistics.fmean(fresh_n)) if fresh_n else 0
    return {"groups": float(sum(kinds.values())), "fresh per group": statistics.fmean(fresh_n) if fresh_n else 0.0,
            "fresh pass rate": p, "fresh all fail": kinds["all fail"] / n, "fresh all pass": kinds["all pass"] / n,
            "fresh mixed": kinds["mixed"] / n, "informative with branches": informative / n,
            "(1-p)^n": (1 - p) ** k}


def branch_figures(groups: list[list[RolloutRecord]]) -> tuple[dict[str, float], collections.Counter[int]]:
    """The branch points' figures over the groups (rollout/branching.py `point_outcomes`: a parent
    counts in its point's outcomes when it is kept, as the step's own `branch_mixed` counts it)."""
    at_call: collections.Counter[int] = collections.Counter()
    points = mixed = parent_pass = 0
    after: dict[bool, list[float]] = {True: [], False: []}
    siblings: dict[bool, list[float]] = {True: [], False: []}  # the group's other fresh samples
    for g in groups:
        fresh = counted(g, fresh_only=True)
        for point in point_outcomes(g, None):
            points += 1
            at_call[point.call] += 1
            mixed += point.mixed
            if point.parent_outcome is not None:
                won = point.parent_outcome > 0
                parent_pass += won
                after[won] += list(point.branches)
                siblings[won] += [float(passed(f)) for f in fresh if f.rollout_id != point.parent]
    n = points or 1
    return ({"branch points": float(points), "mixed": mixed / n, "parent passed": parent_pass / n,
             "branch pass, parent passed": statistics.fmean(after[True]) if after[True] else float("nan"),
             "branch pass, parent failed": statistics.fmean(after[False]) if after[False] else float("nan"),
             "other fresh pass, parent passed": statistics.fmean(siblings[True]) if siblings[True] else float("nan"),
             "other fresh pass, parent failed": statistics.fmean(siblings[False]) if siblings[False] else float("nan")},
            at_call)


def by_call(groups: list[list[RolloutRecord]]) -> dict[str, dict[str, float]]:
    """`branch_figures` of the points at each call index on their own."""
    calls = sorted(branch_figures(groups)[1])
    out = {}
    for call in calls:
        only = [[r for r in g if r.lineage is None or r.lineage.branch_call == call] for g in groups]
        out[f"call {call}"] = branch_figures(only)[0]
    return out


def table(rows: dict[str, dict[str, float]]) -> list[str]:
    cols = list(next(iter(rows.values())))
    lines = ["| arm | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
    for arm, r in rows.items():
        cells = [f"{r[c]:.0f}" if c in ("groups", "branch points") else f"{r[c]:.1f}" if c == "fresh per group"
                 else f"{r[c]:.0%}" if r[c] == r[c] else "-" for c in cols]
        lines.append(f"| {arm} | " + " | ".join(cells) + " |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("experiment", type=Path, help="an experiment directory (harnessrl experiment --out)")
    ap.add_argument("--arms", default="", help="comma-separated arms (default: all but the baseline)")
    args = ap.parse_args()
    runs = arm_runs(args.experiment, [a for a in args.arms.split(",") if a] or None)
    if not runs:
        raise SystemExit(f"no finished arm runs under {args.experiment}")
    read = {arm: [training_groups(run) for run in rs] for arm, rs in runs.items()}
    by_arm = {arm: [g for groups, _ in got for g in groups] for arm, got in read.items()}
    print(f"## groups ({', '.join(f'{a}: {len(rs)} seeds' for a, rs in runs.items())})\n")
    print("\n".join(table({a: group_figures(g) for a, g in by_arm.items()})))
    print("\n## calls cut at max_tokens, per step (each seed: cut / served calls)\n")
    for arm, got in read.items():
        for run, (_, cut) in zip(runs[arm], got):
            print(f"- {arm} {run.name}: " + ", ".join(f"{k}/{n}" for _, (n, k) in sorted(cut.items())))
    branched = {a: branch_figures(g) for a, g in by_arm.items()}
    branched = {a: b for a, b in branched.items() if b[0]["branch points"]}
    if branched:
        print("\n## branch points\n")
        print("\n".join(table({a: b[0] for a, b in branched.items()})))
        for a in branched:
            print(f"\n## {a}: branch points by call index (how many calls of the parent were replayed)\n")
            print("\n".join(table(by_call(by_arm[a]))).replace("| arm |", "| point |", 1))


if __name__ == "__main__":
    main()
