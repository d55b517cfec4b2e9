"""How well the difficulty sampler's estimates predict which groups will have contrast, from
finished runs' `difficulty.json` (rollout/difficulty.py).

For every recorded group, in step order, the tracker is rebuilt from the groups of the earlier
steps and its pass-rate estimate p for the group's task and harness gives the chance of a mixed
group, 1 - p^n - (1 - p)^n (what the sampler's p(1 - p) weight stands for). The script prints the
Brier score of that prediction against what happened, next to two references: a constant (the
runs' overall mixed share) and each family x harness's own mixed share so far (a beta prior of
`--prior` groups at the constant). Lower is better; above the constant means the estimate says less
than nothing about contrast. Then per family x harness: groups, mixed / all-pass / all-fail shares,
so a family out of the model's reach (nearly all all-fail) stands out.

    .venv/bin/python benchmarks/sampler_calibration.py RUN_DIR [RUN_DIR ...] [--prior 2] [--decay 0.7]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from harnessrl.rollout.difficulty import DifficultyTracker, Observation, SamplerConfig  # noqa: E402


def mixed(o: Observation) -> bool:
    return 0 < o.passes < o.n


def p_mixed(p: float, n: int) -> float:
    return 1.0 - p ** n - (1.0 - p) ** n


def scores(runs: list[list[Observation]], cfg: SamplerConfig, prior: float) -> dict[str, float]:
    """Brier scores of the three predictors over every group of every run."""
    every = [o for obs in runs for o in obs]
    base = sum(map(mixed, every)) / len(every)
    sums = {"tracker": 0.0, "constant": 0.0, "family mixed share": 0.0}
    for obs in runs:
        tracker = DifficultyTracker(obs, cfg)
        for o in obs:
            before = tracker.until(o.step - 1)  # the groups of the steps before this one
            est = before.pass_rate(o.task, o.family, o.harness, o.step)
            same = [x for x in before.observations if x.family == o.family and x.harness == o.harness]
            fam = (prior * base + sum(map(mixed, same))) / (prior + len(same))
            y = float(mixed(o))
            sums["tracker"] += (p_mixed(est, o.n) - y) ** 2
            sums["constant"] += (base - y) ** 2
            sums["family mixed share"] += (fam - y) ** 2
    return {k: v / len(every) for k, v in sums.items()} | {"mixed share": base, "groups": float(len(every))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", type=Path)
    ap.add_argument("--prior", type=float, default=2.0, help="the tracker's prior (pseudo-rollouts), and the "
                                                             "family-share reference's (pseudo-groups)")
    ap.add_argument("--decay", type=float, default=0.7, help="the tracker's weight per step of age")
    args = ap.parse_args()
    runs = []
    for d in args.runs:
        try:
            runs.append(DifficultyTracker.load(d).observations)
        except ValueError as err:
            sys.exit(str(err))
    runs = [r for r in runs if r]
    if not runs:
        sys.exit("no recorded groups: give run dirs that used loop.sampler: difficulty (their difficulty.json)")
    cfg = SamplerConfig(type="difficulty", prior=args.prior, decay=args.decay)
    s = scores(runs, cfg, args.prior)
    print(f"{len(runs)} runs, {s['groups']:.0f} groups, {s['mixed share']:.1%} mixed")
    print("| predictor of a mixed group | Brier |\n|---|---:|")
    for k in ("tracker", "constant", "family mixed share"):
        print(f"| {k} | {s[k]:.4f} |")
    table: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for o in (o for obs in runs for o in obs):
        row = table[(o.family, o.harness)]
        row[0] += 1
        row[1] += mixed(o)
        row[2] += o.passes == o.n
        row[3] += o.passes == 0
    print("\n| family | harness | groups | mixed | all pass | all fail |\n|---|---|---:|---:|---:|---:|")
    for (fam, harness), (n, m, ap_, af) in sorted(table.items()):
        print(f"| {fam or '-'} | {harness} | {n} | {m / n:.0%} | {ap_ / n:.0%} | {af / n:.0%} |")


if __name__ == "__main__":
    main()
