"""Mixed-harness learning benchmark: GRPO from the default model through real harnesses in one run.

Runs `harnessrl train --config configs/learning_harnesses.yaml` (or summarises a finished run) and
prints, per eval set and harness, held-out pass@1 before and after with a PAIRED 95% bootstrap
interval of the change (the same tasks are evaluated before and after, so tasks are resampled in
pairs), then the per-step curves: train reward, pass rate, |logp gap|, trained tokens.

    .venv/bin/python benchmarks/learning/harnesses.py [--config configs/learning_harnesses.yaml]
                                                      [--run-dir runs/learning_harnesses] [--summarise-only]
                                                      [--baseline-from RUN_DIR]  (reuse its step-0 eval)
                                                      [key=value ...]   (config overrides)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import train  # noqa: E402  (benchmarks/learning/run.py: train or resume one config)

from harnessrl.store.records import rollout_passed  # noqa: E402
from harnessrl.store import RunStore  # noqa: E402
from harnessrl.tasks.loader import load_tasks  # noqa: E402


def eval_outcomes(run_dir: Path, first_set: str = "test") -> dict[tuple[str, str, int], dict[str, list[float]]]:
    """{(set, harness, step): {task id: [1.0 per passed rollout, 0.0 otherwise]}} of the eval groups
    (the run's first eval set has unlabelled group ids: `first_set` names it)."""
    store = RunStore(run_dir)
    try:
        records = [r for r in store.list_rollouts() if r.group_id.startswith("eval-")]
    finally:
        store.close()
    tasks = {t.id: t for t in load_tasks("builtin:all")} if records else {}
    try:  # the held-out splits are not in builtin:all's train/test only on some versions: load them too
        for name in ("paraphrase", "unseen"):
            tasks.update({t.id: t for t in load_tasks(f"builtin:{name}")})
    except Exception:  # noqa: BLE001 - older suites have no such split
        pass
    out: dict[tuple[str, str, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        parts = r.group_id.split("-")  # eval-<set>-s<step>-... or eval-s<step>-... (the headline set)
        name = parts[1] if not parts[1].startswith("s") or not parts[1][1:].isdigit() else first_set
        out[(name, r.harness, r.step)][r.task_id].append(float(rollout_passed(r, tasks.get(r.task_id))))
    return out


def paired_change(before: dict[str, list[float]], after: dict[str, list[float]], resamples: int = 4000,
                  seed: int = 0) -> tuple[float, float, float, int]:
    """(change in pass@1, 95% low, 95% high, tasks) with tasks resampled in before/after pairs."""
    ids = sorted(set(before) & set(after))
    if not ids:
        return 0.0, 0.0, 0.0, 0
    diffs = [sum(after[t]) / len(after[t]) - sum(before[t]) / len(before[t]) for t in ids]
    rng = random.Random(seed)
    means = sorted(sum(rng.choice(diffs) for _ in ids) / len(ids) for _ in range(resamples))
    return sum(diffs) / len(diffs), means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1], len(ids)


def summarise(run_dir: Path) -> str:
    recs = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    outcomes = eval_outcomes(run_dir)
    # the recorded steps with an eval (eval rollouts of a step whose attempt died before recording it
    # are left out: that step was redone, or the run was cut short before it)
    recorded = {r["step"] for r in recs if r.get("eval")}
    steps = sorted({s for (_, _, s) in outcomes} & recorded)
    lines = [f"# {run_dir}", ""]
    if len(steps) >= 2:
        s0, s1 = steps[0], steps[-1]
        lines += [f"held-out pass@1, step {s0} -> step {s1} (change: paired 95% bootstrap over tasks)", "",
                  "| set | harness | before | after | change [95% CI] | tasks x samples |", "|---|---|---|---|---|---|"]
        for name, harness in sorted({(n, h) for (n, h, _) in outcomes}):
            b, a = outcomes.get((name, harness, s0), {}), outcomes.get((name, harness, s1), {})
            if not b or not a:
                continue
            nb, na = sum(map(len, b.values())), sum(map(len, a.values()))
            pb, pa = sum(map(sum, b.values())) / nb, sum(map(sum, a.values())) / na
            d, lo, hi, n = paired_change(b, a)
            lines.append(f"| {name} | {harness} | {100 * pb:.1f}% ({nb}) | {100 * pa:.1f}% ({na}) | "
                         f"{100 * d:+.1f} pts [{100 * lo:+.1f}, {100 * hi:+.1f}] | {n} x {nb // max(n, 1)} |")
        lines.append("")
    lines.append("per step: train reward | pass rate | mean |logp gap| | trained tokens | wall s")
    for r in recs:
        if r["step"] == 0:
            continue
        rw = " ".join(f"{h}={v:.2f}" for h, v in (r.get("reward") or {}).items())
        pr = " ".join(f"{h}={v:.2f}" for h, v in (r.get("pass_rate") or {}).items())
        gap = r.get("abs_logp_gap", "-")
        toks = f"{r.get('tokens_computed', 0):.0f} (per-call {r.get('per_call_tokens', 0):.0f})"
        t = sum((r.get("time") or {}).values())
        lines.append(f"  {r['step']:>3}: {rw or '-'} | {pr or '-'} | {gap if isinstance(gap, str) else f'{gap:.4f}'}"
                     f" | {toks} | {t:.0f}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="configs/learning_harnesses.yaml")
    ap.add_argument("--run-dir", default="runs/learning_harnesses")
    ap.add_argument("--summarise-only", action="store_true")
    ap.add_argument("--baseline-from", type=Path, default=None,
                    help="start from this run's step 0 (its baseline eval; fork_baseline.py) instead of a new one")
    args, overrides = ap.parse_known_args()
    run_dir = (ROOT / args.run_dir).resolve()
    if args.baseline_from is not None and not run_dir.exists():
        from fork_baseline import fork  # noqa: PLC0415

        from harnessrl.config import load_config  # noqa: PLC0415

        cfg = load_config(ROOT / args.config, overrides + [f"output.run_dir={run_dir}"])
        fork((ROOT / args.baseline_from).resolve(), run_dir, cfg.model_dump(mode="json"))
    if not args.summarise_only:
        train(args.config, run_dir, overrides)
    print(summarise(run_dir))


if __name__ == "__main__":
    main()
