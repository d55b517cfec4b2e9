"""How well the difficulty sampler's estimates predict which groups will have contrast, from
finished runs' `difficulty.json` (rollout/difficulty.py), or (`--simulate`) on simulated runs with
polarised per-task pass rates, where the old sampler and the new one run side by side.

Finished runs: for every recorded training group, in step order, the tracker is rebuilt from the
groups of the earlier steps (eval groups included) and predicts the chance of a mixed group two
ways: the sampler's P(mixed) (today: a group's rate drawn around its task's mean with the fitted
dispersion k), and the old point estimate 1 - p^n - (1 - p)^n with p the task's rate shrunk by
`--prior` pseudo-rollouts. benchmarks/difficulty_replay.py scores them at the runs' real picks with
what the loop knew then (timed from the store), against a causal constant too. The
script prints their Brier scores against what happened, next to two references: a constant (the
runs' overall mixed share) and each family x harness's own mixed share so far (a beta prior of
`--prior` groups at the constant). Lower is better; above the constant means the estimate says less
than nothing about contrast. Then per family x harness: groups, mixed / all-pass / all-fail shares,
so a family out of the model's reach (nearly all all-fail) stands out.

Simulation: each run draws families (mean pass rate U(0.25, 0.8)) and per task and harness a pass
rate from Beta(c m, c (1 - m)) (c = `--concentration`, 0.6: polarised as the issue's demo was),
then runs `--steps` steps of `--groups` groups of `--n` with dynamic sampling (`--extra`
replacements). `old`: the point estimate, weight p (1 - p), replacements drawn by weight, no eval
groups observed, no rescue; `new`: the tracker's P(mixed) (`--estimate k`, the sampler's;
`posterior`: the estimate before issue 43, 1 - E[p^n] - E[(1 - p)^n] under the task's posterior),
weight P(mixed), replacements of the highest P(mixed), the baseline eval's groups observed, rescue
groups (`--rescue`). `--learn L`: after a step, each task whose group there was mixed (it trained)
gains L logit through that harness, as trained tasks do in real runs (0: only the drift of all).
Both score both predictors on their own picks; informative = informative groups trained per slot
of the batch.
`new, top-up`: the new sampler with dynamic_sampling's top-up (`--target`, `--cap`): with the
replacements spent, more groups on the tasks of the highest P(mixed), round by round, until the
target share of the batch is informative or the step sampled `--cap` x groups x n fresh rollouts.
Each case (`--concentration`, several: 0.6 polarised, 1.5 demo-like) prints per sampler the
informative share per run (min / median / mean over runs), runs >= 80%, steps that trained
nothing, the fresh rollouts a step beyond its own groups x n (mean / max), its rounds of fresh
groups (each a wait for its slowest rollout), and the mixed share of picks that revisit a task seen
mixed at an earlier step against the other picks (the two recorded runs: 62% of 26 against 64% of 50).

    .venv/bin/python benchmarks/sampler_calibration.py RUN_DIR [RUN_DIR ...] [--prior 2] [--decay 0.7]
    .venv/bin/python benchmarks/sampler_calibration.py --simulate [--runs-n 100] [--steps 8] \
        [--concentration 0.6 1.5] [--target 0.8] [--cap 3] [--learn 0] [--estimate k|posterior]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from harnessrl.rollout.difficulty import (DifficultyTracker, Observation, SamplerConfig, brier,  # noqa: E402
                                          point_p_mixed)
from harnessrl.rollout.informative import step_rollout_cap, topup_target  # noqa: E402
from harnessrl.rollout.plan import plan_more, plan_step  # noqa: E402


def mixed(o: Observation) -> bool:
    return 0 < o.passes < o.n


def scores(runs: list[list[Observation]], prior: float, decay: float) -> dict[str, float]:
    """Brier scores of the four predictors over every training group of every run."""
    every = [o for obs in runs for o in obs if o.split != "eval"]
    base = sum(map(mixed, every)) / len(every)
    sums = {"sampler's P(mixed) (new)": 0.0, "point estimate (old)": 0.0, "constant": 0.0,
            "family mixed share": 0.0}
    new_cfg = SamplerConfig(type="difficulty", prior=prior, decay=decay)
    old_cfg = SamplerConfig(type="difficulty", prior=prior, concentration=prior, decay=decay)
    for obs in runs:
        for o in (o for o in obs if o.split != "eval"):
            new = DifficultyTracker(obs, new_cfg).until(o.step - 1)  # the groups of the steps before this one
            old = DifficultyTracker([x for x in obs if x.split != "eval"], old_cfg).until(o.step - 1)
            same = [x for x in old.observations if x.family == o.family and x.harness == o.harness]
            fam = (prior * base + sum(map(mixed, same))) / (prior + len(same))
            y = float(mixed(o))
            sums["sampler's P(mixed) (new)"] += (new.p_mixed(o.task, o.family, o.harness, o.step, o.n) - y) ** 2
            sums["point estimate (old)"] += (point_p_mixed(old.pass_rate(o.task, o.family, o.harness, o.step),
                                                           o.n) - y) ** 2
            sums["constant"] += (base - y) ** 2
            sums["family mixed share"] += (fam - y) ** 2
    return {k: v / len(every) for k, v in sums.items()} | {"mixed share": base, "groups": float(len(every))}


def finished_runs(args: argparse.Namespace) -> None:
    runs = []
    for d in args.runs:
        try:
            runs.append(DifficultyTracker.load(d).observations)
        except ValueError as err:
            sys.exit(str(err))
    runs = [r for r in runs if any(o.split != "eval" for o in r)]
    if not runs:
        sys.exit("no recorded groups: give run dirs that used loop.sampler: difficulty (their difficulty.json), "
                 "or --simulate")
    s = scores(runs, args.prior, args.decay)
    print(f"{len(runs)} runs, {s['groups']:.0f} groups, {s['mixed share']:.1%} mixed")
    print("| predictor of a mixed group | Brier |\n|---|---:|")
    for k in ("sampler's P(mixed) (new)", "point estimate (old)", "constant", "family mixed share"):
        print(f"| {k} | {s[k]:.4f} |")
    table: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0, 0, 0])
    for o in (o for obs in runs for o in obs if o.split != "eval"):
        row = table[(o.family, o.harness)]
        row[0] += 1
        row[1] += mixed(o)
        row[2] += o.passes == o.n
        row[3] += o.passes == 0
    print("\n| family | harness | groups | mixed | all pass | all fail |\n|---|---|---:|---:|---:|---:|")
    for (fam, harness), (n, m, ap_, af) in sorted(table.items()):
        print(f"| {fam or '-'} | {harness} | {n} | {m / n:.0%} | {ap_ / n:.0%} | {af / n:.0%} |")


# -- simulation: polarised per-task pass rates, the old sampler against the new -------------------

@dataclass(frozen=True)
class SimTask:
    id: str
    family: str


def sim_world(rng: random.Random, families: int, per_family: int, harnesses: Sequence[str],
              concentration: float) -> tuple[list[SimTask], list[SimTask], dict[tuple[str, str], float]]:
    """(train tasks, eval tasks, (task, harness) -> pass-rate logit): each family's mean pass rate
    drawn from U(0.25, 0.8), each task's rate from Beta(c m, c (1 - m)) around it (c small: polarised)."""
    train: list[SimTask] = []
    evals: list[SimTask] = []
    logit: dict[tuple[str, str], float] = {}
    for f in range(families):
        mean = rng.uniform(0.25, 0.8)
        for split, out, count in (("train", train, per_family), ("eval", evals, max(per_family // 2, 1))):
            for i in range(count):
                task = SimTask(f"f{f}-{split}{i}", f"f{f}")
                out.append(task)
                for h in harnesses:
                    p = min(max(rng.betavariate(concentration * mean, concentration * (1 - mean)), 1e-4), 1 - 1e-4)
                    logit[(task.id, h)] = math.log(p / (1 - p))
    return train, evals, logit


def sim_group(rng: random.Random, logit: float, step: int, drift: float, n: int) -> int:
    """Passes of n rollouts at step `step` (the policy improves: + drift on the logit per step)."""
    p = 1.0 / (1.0 + math.exp(-(logit + drift * step)))
    return sum(rng.random() < p for _ in range(n))


class PosteriorTracker(DifficultyTracker):
    """The sampler's estimate before issue 43: P(mixed) under the task's posterior itself
    (`--estimate posterior`)."""

    def p_mixed(self, task: str, family: str, harness: str, at: int, n: int) -> float:
        return self.posterior_p_mixed(task, family, harness, at, n)


def sim_run(seed: int, variant: str, a: argparse.Namespace) -> dict[str, Any]:
    """One simulated run with the `old` sampler (point pass rate, p(1 - p) weight, drawn
    replacements, no eval observations, no rescue) or the `new` one (posterior, P(mixed) weight,
    best replacements, eval groups observed, rescue; with `a.target` > 0 the top-up of
    `loop.dynamic_sampling.target_share` within `a.cap` x groups x n rollouts a step). Both record
    both predictors on their picks. Per step: the informative share of the batch, the fresh
    rollouts sampled, and the rounds (waves of fresh groups) it took."""
    harnesses = [f"h{i}" for i in range(a.harnesses)]
    train, evals, logit = sim_world(random.Random(seed), a.families, a.tasks, harnesses, a.concentration)
    rng = random.Random(seed * 7 + 1)
    old_cfg = SamplerConfig(type="difficulty", prior=a.prior, concentration=a.prior, decay=a.decay)
    new_cfg = SamplerConfig(type="difficulty", prior=a.prior, decay=a.decay, sharpness=a.sharpness,
                            floor=a.floor)
    old = DifficultyTracker((), old_cfg)
    new = (PosteriorTracker if a.estimate == "posterior" else DifficultyTracker)((), new_cfg)
    mine = new if variant == "new" else old
    if variant == "new":  # the baseline eval: every eval task through every harness
        for t in evals:
            for h in harnesses:
                k = sim_group(rng, logit[(t.id, h)], 0, a.drift, a.eval_samples)
                new.observe(Observation(0, t.id, t.family, h, k, a.eval_samples, split="eval"))
    n, gps = a.n, a.groups
    target = topup_target(a.target, gps) if variant == "new" else 0
    cap = step_rollout_cap(a.cap, gps, n)
    preds: list[tuple[float, float, bool, bool]] = []  # (old predictor, new predictor, mixed, a revisit)
    was_mixed: set[tuple[str, str]] = set()  # (task, harness) with a mixed group at an earlier step
    shares: list[float] = []
    step_rollouts: list[int] = []
    rounds: list[int] = []
    rescued = topped = 0
    for step in range(1, a.steps + 1):
        seen = mine.until(step - 1)
        trained: set[tuple[str, str]] = set()  # the step's mixed groups: the update learns their tasks
        if variant == "new":
            weight = lambda t, h, s=seen, st=step: s.weight(t.id, t.family, h, st, n)  # noqa: E731
        else:
            weight = lambda t, h, s=seen, st=step: max(  # noqa: E731
                (p := s.pass_rate(t.id, t.family, h, st)) * (1 - p), old_cfg.floor)
        plans = plan_step(step, 1, train, {h: 1.0 for h in harnesses}, gps, n, seed, weight)
        kept, used, budget, rescue = 0, [p.task.id for p in plans], a.extra, (a.rescue if variant == "new" else 0)
        ran = waves = 0
        while plans:
            waves += 1
            for p in plans:
                t = p.task
                k = sim_group(rng, logit[(t.id, p.harness)], step, a.drift, n)
                preds.append((point_p_mixed(old.pass_rate(t.id, t.family, p.harness, step), n),
                               new.p_mixed(t.id, t.family, p.harness, step, n), 0 < k < n,
                               (t.id, p.harness) in was_mixed))
                for tr in (old, new):
                    tr.observe(Observation(step, t.id, t.family, p.harness, k, n))
                kept += 0 < k < n
                ran += n
                if 0 < k < n:
                    trained.add((t.id, p.harness))
            need = gps - kept
            count = min(need, budget)
            first = len(used)
            chance = lambda t, h: mine.p_mixed(t.id, t.family, h, step, n)  # noqa: E731
            if count > 0:
                hs = [harnesses[i % len(harnesses)] for i in range(count)]
                if variant == "new":
                    plans = plan_more(step, 1, train, hs, first, n, seed, chance, exclude=used, best=True)
                else:
                    plans = plan_more(step, 1, train, hs, first, n, seed, lambda t, h: max(
                        (p := mine.pass_rate(t.id, t.family, h, step)) * (1 - p), old_cfg.floor), exclude=used)
                budget -= len(plans)
            elif kept < target and (room := (cap - ran) // n) > 0:
                hs = [harnesses[i % len(harnesses)] for i in range(min(target - kept, room))]
                plans = plan_more(step, 1, train, hs, first, n, seed, chance, exclude=used, best=True)
                topped += len(plans)
            elif kept == 0 and rescue > 0:
                least = lambda t, h: (x if (x := chance(t, h)) >= a.rescue_min else 0.0)  # noqa: E731
                plans = plan_more(step, 1, train, harnesses[:rescue], first, n, seed, least, exclude=used, best=True)
                rescue = rescue - len(plans) if plans else 0
                rescued += len(plans)
            else:
                plans = []
            used += [p.task.id for p in plans]
        for key in trained:  # the policy learns the tasks it trained on (beyond the drift of all)
            logit[key] += a.learn
        was_mixed |= trained
        shares.append(min(kept / gps, 1.0))
        step_rollouts.append(ran)
        rounds.append(waves)
    return {"preds": preds, "shares": shares, "rescued": rescued, "topped": topped, "rollouts": step_rollouts,
            "rounds": rounds}


def simulate(a: argparse.Namespace) -> None:
    cases = list(dict.fromkeys((c, v, t) for c in a.cases for v, t in (("old", 0.0), ("new", 0.0), ("new", a.target))))
    print(f"simulation: {a.runs} runs x {a.steps} steps a case, {a.families} families x {a.tasks} train tasks, "
          f"{a.harnesses} harnesses, groups of {a.n}, {a.groups} groups a step (+{a.extra} replacements, "
          f"{a.rescue} rescue), task pass rates Beta(c m, c (1 - m)) per family mean m, drift {a.drift:g} "
          f"logit per step, new sampler's sharpness {a.sharpness:g} (floor {a.floor:g}); top-up: target share "
          f"{a.target:g}, at most {a.cap:g} x {a.groups} x {a.n} = {step_rollout_cap(a.cap, a.groups, a.n)} "
          f"fresh rollouts a step\n")
    print("| c | sampler | Brier old predictor | Brier new predictor | Brier constant | informative per run: "
          "min / median / mean | runs >= 80% | steps training nothing | extra rollouts per step (mean / max) "
          "| rounds per step (mean / max) | mixed: revisits of a mixed task / other picks |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for c, variant, target in cases:
        case = argparse.Namespace(**{**vars(a), "concentration": c, "target": target})
        runs = [sim_run(seed, variant, case) for seed in range(a.runs)]
        preds = [p for r in runs for p in r["preds"]]
        share = sum(m for _, _, m, _ in preds) / len(preds)
        b_old = brier((o, m) for o, _, m, _ in preds)
        b_new = brier((x, m) for _, x, m, _ in preds)
        b_const = brier((share, m) for _, _, m, _ in preds)
        again = [m for _, _, m, r in preds if r]
        others = [m for _, _, m, r in preds if not r]
        per_run = sorted(sum(r["shares"]) / len(r["shares"]) for r in runs)
        zero = sum(s == 0 for r in runs for s in r["shares"])
        steps = a.runs * a.steps
        extra = [x - a.groups * a.n for r in runs for x in r["rollouts"]]
        rounds = [x for r in runs for x in r["rounds"]]
        name = variant + (f", top-up to {target:g} (cap {a.cap:g}x)" if target else "")
        print(f"| {c:g} | {name} | {b_old:.3f} | {b_new:.3f} | {b_const:.3f} | "
              f"{per_run[0]:.0%} / {statistics.median(per_run):.0%} / {statistics.fmean(per_run):.1%} | "
              f"{sum(x >= 0.8 for x in per_run)}/{len(per_run)} | {zero}/{steps} | "
              f"{statistics.fmean(extra):.1f} / {max(extra)} | {statistics.fmean(rounds):.2f} / {max(rounds)} | "
              f"{statistics.fmean(again) if again else 0:.0%} of {len(again)} / "
              f"{statistics.fmean(others) if others else 0:.0%} of {len(others)} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="*", type=Path)
    ap.add_argument("--prior", type=float, default=2.0, help="the tracker's family prior and the old point "
                                                             "estimate's pseudo-rollouts (and the family-share "
                                                             "reference's pseudo-groups)")
    ap.add_argument("--decay", type=float, default=0.7, help="the tracker's weight per step of age")
    ap.add_argument("--simulate", action="store_true", help="simulated runs instead of run dirs")
    ap.add_argument("--runs-n", dest="n_runs", type=int, default=100, help="simulated runs per sampler")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--families", type=int, default=3)
    ap.add_argument("--tasks", type=int, default=10, help="train tasks per family (eval: half as many)")
    ap.add_argument("--harnesses", type=int, default=2)
    ap.add_argument("--groups", type=int, default=4, help="loop.groups_per_step")
    ap.add_argument("--n", type=int, default=6, help="loop.n_per_group")
    ap.add_argument("--extra", type=int, default=2, help="dynamic_sampling.max_extra_groups")
    ap.add_argument("--rescue", type=int, default=2, help="dynamic_sampling.rescue_groups (new only)")
    ap.add_argument("--rescue-min", type=float, default=0.25)
    ap.add_argument("--eval-samples", type=int, default=3)
    ap.add_argument("--concentration", dest="cases", type=float, nargs="+", default=[0.6, 1.5],
                    help="c of the task pass rates' Beta, one case each (0.6: polarised, 1.5: demo-like)")
    ap.add_argument("--target", type=float, default=0.8, help="dynamic_sampling.target_share of the top-up "
                                                               "(0: no top-up row)")
    ap.add_argument("--cap", type=float, default=3.0, help="dynamic_sampling.max_rollouts_factor: fresh "
                                                            "rollouts a step, in units of groups x n")
    ap.add_argument("--drift", type=float, default=0.15, help="logit gained per step (the policy learns)")
    ap.add_argument("--learn", type=float, default=0.0, help="logit a task gains through a harness after a "
                                                              "step in which its group there was mixed (trained)")
    ap.add_argument("--estimate", choices=("k", "posterior"), default="k",
                    help="the new sampler's P(mixed): the tracker's (k dispersion) or the posterior's (before)")
    ap.add_argument("--sharpness", type=float, default=1.0, help="loop.sampler.sharpness of the new sampler")
    ap.add_argument("--floor", type=float, default=0.05, help="loop.sampler.floor of the new sampler")
    args = ap.parse_args()
    if args.simulate:
        args.runs = args.n_runs
        simulate(args)
    elif args.runs:
        finished_runs(args)
    else:
        ap.error("give RUN_DIR ... or --simulate")


if __name__ == "__main__":
    main()
