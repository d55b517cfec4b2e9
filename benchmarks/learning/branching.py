"""Branching rollouts against flat GRPO (and PPO) at an equal budget of sampled rollouts per group.

Trains configs/branching_chain.yaml as arms that differ only in how a group spends its 8 sampled
rollouts, all from the same base model and seed:

    flat     grpo,  n_per_group 8, no branching
    branch   tree_grpo, n_per_group 4 + loop.branching {points 2, width 2}
    ppo      ppo (GAE with the critic), n_per_group 8            (--arms to choose)

The first arm runs the baseline eval (step 0); the others start from a copy of it
(fork_baseline.py), so every arm is compared with the same before-figures. Then it prints, per
eval set and harness: pass@1 before and after each arm with a paired 95% bootstrap interval over
tasks (the same tasks before and after), the paired difference of each arm against `flat`, the
train rollouts each arm sampled, the share of its branches that diverged, and its wall time.

    .venv/bin/python benchmarks/learning/branching.py [--config configs/branching_files.yaml]
                                                      [--arms flat branch ppo] [--out runs/branching]
                                                      [--baseline-from RUN] [--summarise-only] [key=value ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harnesses import paired_change  # noqa: E402
from run import train  # noqa: E402

from harnessrl.store.groups import drop_abandoned_attempts  # noqa: E402
from harnessrl.store.records import rollout_passed  # noqa: E402
from harnessrl.store import RunStore  # noqa: E402
from harnessrl.tasks.loader import load_tasks  # noqa: E402

CONFIG = "configs/branching_chain.yaml"
ARMS: dict[str, list[str]] = {
    "flat": ["algorithm.name=grpo", "loop.n_per_group=8", "loop.branching={points: 0}"],
    "branch": ["algorithm.name=tree_grpo", "loop.n_per_group=4", "loop.branching={points: 2, width: 2}"],
    "ppo": ["algorithm.name=ppo", "loop.n_per_group=8", "loop.branching={points: 0}"],
}


def outcomes(run_dir: Path, sets: list[str]) -> dict[tuple[str, str, int], dict[str, list[float]]]:
    """{(set, harness, step): {task id: [1.0 per passed eval rollout, else 0.0]}}."""
    tasks = {t.id: t for name in sets for t in load_tasks(name if name.startswith("builtin:") else f"builtin:{name}")}
    labels = {name.replace(":", "_"): name for name in sets}
    store = RunStore(run_dir)
    try:
        records = [r for r in store.list_rollouts() if r.group_id.startswith("eval-")]
    finally:
        store.close()
    out: dict[tuple[str, str, int], dict[str, list[float]]] = {}
    for r in records:
        label = r.group_id[len("eval-"):].split("-s")[0]
        name = labels.get(label, sets[0])  # the first set's groups carry no label
        out.setdefault((name, r.harness, r.step), {}).setdefault(r.task_id, []).append(
            float(rollout_passed(r, tasks.get(r.task_id))))
    return out


def train_facts(run_dir: Path) -> dict[str, float]:
    """Train rollouts sampled, branches and how many diverged, wall time of the training steps."""
    store = RunStore(run_dir)
    try:
        # the latest attempt of each step: a step redone after a crash (--resume) trained only its redo
        train_rollouts = [r for r in drop_abandoned_attempts(store.list_rollouts())
                          if not r.group_id.startswith("eval-") and r.step > 0]
        steps = [m for s, m in store.list_steps() if s > 0]
    finally:
        store.close()
    branches = [r for r in train_rollouts if r.lineage is not None]
    wall = sum(sum((m.get("time") or {}).values()) for m in steps)
    return {"sampled": len(train_rollouts), "branches": len(branches),
            "diverged": sum(bool(b.lineage.diverged) for b in branches if b.lineage), "wall_s": wall,
            "train_wall_s": sum(sum(v for k, v in (m.get("time") or {}).items() if k != "eval") for m in steps)}


def paired_diff(a: dict[str, list[float]], b: dict[str, list[float]]) -> str:
    d, lo, hi, n = paired_change(b, a)  # a - b, tasks paired
    return f"{100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]" if n else "-"


def summarise(out: Path, arms: list[str], sets: list[str]) -> str:
    results = {arm: outcomes(out / arm, sets) for arm in arms if (out / arm / "harnessrl.sqlite").exists()}
    if not results:
        return "no arm has run yet"
    first = next(iter(results.values()))
    harnesses = sorted({h for (_, h, _) in first})
    lines = ["held-out pass@1 (n = tasks x samples); change vs base and vs flat: paired 95% bootstrap over tasks", "",
             "| set | harness | base | " + " | ".join(f"{a} after | {a} vs base" + (" | vs flat" if a != "flat" else "")
                                                 for a in results) + " |",
             "|---|---|---|" + "---|" * sum(3 if a != "flat" else 2 for a in results)]
    for name in sets:
        for h in harnesses:
            base = first.get((name, h, 0), {})
            if not base:
                continue
            nb = sum(map(len, base.values()))
            row = [name.split(":")[-1], h, f"{100 * sum(map(sum, base.values())) / nb:.1f}% ({nb})"]
            after_flat = None
            for arm, res in results.items():
                last = max((s for (n, hh, s) in res if n == name and hh == h), default=0)
                after = res.get((name, h, last), {}) if last > 0 else {}
                if not after:
                    row += ["-", "-"] + (["-"] if arm != "flat" else [])
                    continue
                na = sum(map(len, after.values()))
                row += [f"{100 * sum(map(sum, after.values())) / na:.1f}% ({na})", paired_diff(after, base)]
                if arm == "flat":
                    after_flat = after
                else:
                    row.append(paired_diff(after, after_flat) if after_flat else "-")
            lines.append("| " + " | ".join(row) + " |")
    lines += ["", "| arm | train rollouts sampled | branches (diverged) | train wall s | wall s |", "|---|---|---|---|---|"]
    for arm in results:
        f = train_facts(out / arm)
        lines.append(f"| {arm} | {f['sampled']} | {f['branches']} ({f['diverged']}) | {f['train_wall_s']:.0f} | "
                     f"{f['wall_s']:.0f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arms", nargs="+", default=["flat", "branch"], choices=list(ARMS))
    ap.add_argument("--out", default="runs/branching")
    ap.add_argument("--config", default=CONFIG)
    ap.add_argument("--summarise-only", action="store_true")
    ap.add_argument("--baseline-from", type=Path, default=None,
                    help="every arm starts from this run's step 0 (e.g. another seed's first arm)")
    args, overrides = ap.parse_known_args()
    from harnessrl.config import load_config  # noqa: PLC0415

    out = (ROOT / args.out).resolve()
    cfg = load_config(ROOT / args.config, overrides)
    sets = cfg.tasks.eval_set_names()
    if not args.summarise_only:
        first = (ROOT / args.baseline_from).resolve() if args.baseline_from else out / args.arms[0]
        for arm in args.arms:
            run_dir = out / arm
            arm_overrides = [*overrides, *ARMS[arm], f"output.run_dir={run_dir}"]
            if run_dir != first and not run_dir.exists() and (first / "harnessrl.sqlite").exists():
                from fork_baseline import fork  # noqa: PLC0415

                fork(first, run_dir, load_config(ROOT / args.config, arm_overrides).model_dump(mode="json"))
            train(args.config, run_dir, arm_overrides)
    table = summarise(out, args.arms, sets)
    print(table)
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
