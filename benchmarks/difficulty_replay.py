"""Replay recorded runs through the difficulty sampler's estimates (rollout/difficulty.py) and score
each at the run's real picks: how well does it predict which picked group comes back mixed?

Per run directory (harnessrl.sqlite, metrics.jsonl and difficulty.json; opened read-only): every
group of fresh rollouts, training and eval, in time order (its rollouts' first and last model call).
Each training group the sampler picked (metrics.jsonl `sampler_picks`) is predicted from what the
loop knew when it was picked: the groups that had ended before its first rollout started; for a
step's own groups (the first groups_per_step + oversample) only the steps it was planned from
(`planned_from`), as the loop plans them before the step's rollouts run. The predicted chance of a
mixed group of n is scored against what its fresh samples did (Brier: lower is better):

- `new (k dispersion)`: the sampler's estimate now, `DifficultyTracker.p_mixed` (a group's rate a
  draw around its task's posterior mean);
- `posterior (before)`: the estimate until issue 43, 1 - E[p^n] - E[(1 - p)^n] under the task's
  Beta posterior (`posterior_p_mixed`); the column `recorded` says how close its replay comes to the
  P(mixed) the run recorded at each pick (runs recorded before issue 43: the replay's check);
- `point`: 1 - p^n - (1 - p)^n at the posterior mean p;
- `constant, hindsight`: the run's own mixed share over its picks, known only once the run ended
  (report.md's first constant);
- `constant, causal`: the mixed share of the run's training groups of the steps before the pick's,
  (1 + mixed) / (2 + groups) (report.md's second constant).

Every estimate uses the run's own loop.sampler config; m and k are fitted on the run's groups so
far, so nothing is fitted across runs. Pooled = over all picks of all runs; `new - hindsight` is the
pooled difference with a 95% bootstrap interval over picks.

    .venv/bin/python benchmarks/difficulty_replay.py RUN_DIR_OR_ROOT [...] [--boot 2000]

An argument without a harnessrl.sqlite is searched for run directories below it.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from harnessrl.rollout.difficulty import (DifficultyTracker, Observation, SamplerConfig, brier,  # noqa: E402
                                          planned_from, point_p_mixed)
from harnessrl.store.records import is_scored  # noqa: E402

PREDICTORS = ("new (k dispersion)", "posterior (before)", "point", "constant, hindsight", "constant, causal")


@dataclass(frozen=True)
class Group:
    start: float  # first model call of its fresh rollouts (epoch s)
    end: float  # last one
    obs: Observation


@dataclass(frozen=True)
class Pick:
    history: tuple[Observation, ...]  # what the loop knew when it picked the group
    obs: Observation  # what the group did
    recorded: float | None  # the P(mixed) the run recorded at the pick


def mixed(o: Observation) -> bool:
    return 0 < o.passes < o.n


def run_dirs(paths: Sequence[Path]) -> list[Path]:
    """Each path that is a run directory, else the run directories below it (sorted)."""
    out: list[Path] = []
    for p in paths:
        if (p / "harnessrl.sqlite").is_file():
            out.append(p)
        else:
            out += sorted(d.parent for d in p.rglob("harnessrl.sqlite") if (d.parent / "metrics.jsonl").is_file())
    return out


def read_run(run_dir: Path) -> tuple[dict[str, Any], list[Group], dict[str, dict[str, Any]]]:
    """(the run's config, its groups of fresh rollouts by start, its picks by group id), read-only.
    A group's counts and family are the loop's own (difficulty.json) where it recorded them."""
    db = sqlite3.connect(f"file:{run_dir / 'harnessrl.sqlite'}?mode=ro", uri=True)
    try:
        cfg = json.loads(dict(db.execute("SELECT key, value FROM meta").fetchall()).get("config") or "{}")
        times = {rid: (t0, t1) for rid, t0, t1 in
                 db.execute("SELECT rollout_id, MIN(t_start), MAX(t_end) FROM calls GROUP BY rollout_id")}
        rows = db.execute("SELECT rollout_id, task_id, harness, group_id, status, reward, step, split FROM rollouts "
                          "WHERE lineage IS NULL").fetchall()
    finally:
        db.close()
    path = run_dir / "difficulty.json"
    known = {o.group: o for o in DifficultyTracker.load(run_dir).observations} if path.is_file() else {}
    by_group: dict[str, list[tuple[Any, ...]]] = {}
    for r in rows:
        by_group.setdefault(r[3], []).append(r)
    groups = []
    for gid, rs in by_group.items():
        spans = [times[r[0]] for r in rs if r[0] in times]
        if not spans:
            continue
        _, task, harness, _, _, _, step, split = rs[0]
        scored = [r for r in rs if is_scored(r[4], r[5])]
        obs = known.get(gid) or Observation(step, task, task.split("-")[0], harness,
                                            sum(r[5] >= 1.0 - 1e-9 for r in scored), len(scored),
                                            split="train" if split == "train" else "eval", group=gid)
        groups.append(Group(min(s for s, _ in spans), max(e for _, e in spans), obs))
    picks: dict[str, dict[str, Any]] = {}
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        rec = json.loads(line) if line.strip() else {}
        for p in rec.get("sampler_picks") or ():
            picks[str(p.get("group"))] = p
    return cfg, sorted(groups, key=lambda g: g.start), picks


def own_groups(loop: dict[str, Any]) -> int:
    """How many groups a step plans before its rollouts run (the rest are picked as it goes)."""
    ds = loop.get("dynamic_sampling") or {}
    return int(loop.get("groups_per_step", 0)) + (int(ds.get("oversample", 0)) if ds.get("enabled") else 0)


def run_picks(run_dir: Path) -> tuple[SamplerConfig, int, list[Pick]]:
    """The run's sampler config, its max_policy_lag and its picks with what the loop knew at each."""
    cfg, groups, recorded = read_run(run_dir)
    loop = cfg.get("loop") or {}
    sampler = loop.get("sampler") or {}
    scfg = SamplerConfig.model_validate(sampler if isinstance(sampler, dict) else {"type": sampler})
    lag, first = int(loop.get("max_policy_lag", 0)), own_groups(loop)
    out = []
    for g in groups:
        pick = recorded.get(g.obs.group)
        if pick is None or g.obs.split != "train" or g.obs.n < 2:
            continue
        before = [h.obs for h in groups if h.end < g.start]
        if int(g.obs.group.rsplit("-g", 1)[-1] or 0) < first:  # a step's own group: planned before it ran
            seen = DifficultyTracker(before, scfg, min(lag, 1)).until(planned_from(g.obs.step, lag)).observations
            before = seen
        p = pick.get("p_mixed")
        out.append(Pick(tuple(before), g.obs, float(p) if isinstance(p, (int, float)) else None))
    return scfg, lag, out


def predictions(cfg: SamplerConfig, picks: Sequence[Pick]) -> dict[str, list[float]]:
    """Each predictor's P(mixed) at each pick (see the module docstring)."""
    share = sum(mixed(p.obs) for p in picks) / len(picks)
    out: dict[str, list[float]] = {k: [] for k in PREDICTORS}
    for p in picks:
        o, t = p.obs, DifficultyTracker(p.history, cfg)
        trained = [h for h in p.history if h.split == "train" and h.step < o.step]
        out["new (k dispersion)"].append(t.p_mixed(o.task, o.family, o.harness, o.step, o.n))
        out["posterior (before)"].append(t.posterior_p_mixed(o.task, o.family, o.harness, o.step, o.n))
        out["point"].append(point_p_mixed(t.pass_rate(o.task, o.family, o.harness, o.step), o.n))
        out["constant, hindsight"].append(share)
        out["constant, causal"].append((1 + sum(map(mixed, trained))) / (2 + len(trained)))
    return out


def bootstrap(a: Sequence[float], b: Sequence[float], y: Sequence[bool], boots: int,
              seed: int = 0) -> tuple[float, float]:
    """95% interval of Brier(a) - Brier(b) over picks resampled with replacement."""
    rng = random.Random(seed)
    diffs = []
    for _ in range(boots):
        idx = [rng.randrange(len(y)) for _ in y]
        diffs.append(sum((a[i] - y[i]) ** 2 - (b[i] - y[i]) ** 2 for i in idx) / len(idx))
    diffs.sort()
    return diffs[int(0.025 * boots)], diffs[int(0.975 * boots) - 1]


def score(pred: dict[str, list[float]], y: Sequence[bool]) -> dict[str, float]:
    return {k: brier(zip(v, y)) or 0.0 for k, v in pred.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", type=Path, help="run directories, or folders to search for them")
    ap.add_argument("--boot", type=int, default=2000, help="bootstrap resamples of the pooled difference")
    args = ap.parse_args()
    rows: list[tuple[str, int, float, dict[str, float], float]] = []
    pooled: dict[str, list[float]] = {k: [] for k in PREDICTORS}
    outcomes: list[bool] = []
    for d in run_dirs(args.paths):
        try:
            cfg, _, picks = run_picks(d)
        except (sqlite3.Error, ValueError, KeyError) as err:
            print(f"skipped {d}: {err}", file=sys.stderr)
            continue
        if not picks:
            continue
        pred = predictions(cfg, picks)
        y = [mixed(p.obs) for p in picks]
        gaps = [abs(b - p.recorded) for b, p in zip(pred["posterior (before)"], picks) if p.recorded is not None]
        rows.append((str(d), len(picks), sum(y) / len(y), score(pred, y), max(gaps, default=float("nan"))))
        for k in PREDICTORS:
            pooled[k] += pred[k]
        outcomes += y
    if not rows:
        sys.exit("no run with recorded sampler picks (metrics.jsonl sampler_picks) under the paths given")
    print("| run | picks | mixed | " + " | ".join(PREDICTORS) + " | recorded vs replay (max diff) |")
    print("|---|---:|---:|" + "---:|" * len(PREDICTORS) + "---:|")
    for name, n, share, s, check in rows:
        print(f"| {name} | {n} | {share:.0%} | " + " | ".join(f"{s[k]:.3f}" for k in PREDICTORS)
              + f" | {check:.4f} |")
    total = score(pooled, outcomes)
    print(f"| pooled ({len(rows)} runs) | {len(outcomes)} | {sum(outcomes) / len(outcomes):.0%} | "
          + " | ".join(f"{total[k]:.3f}" for k in PREDICTORS) + " | |")
    for ref in ("constant, hindsight", "constant, causal", "posterior (before)"):
        lo, hi = bootstrap(pooled["new (k dispersion)"], pooled[ref], outcomes, args.boot)
        print(f"\nnew - {ref}: {total['new (k dispersion)'] - total[ref]:+.3f} [{lo:+.3f}, {hi:+.3f}] "
              f"(95% bootstrap over {len(outcomes)} picks)", end="")
    print()


if __name__ == "__main__":
    main()
