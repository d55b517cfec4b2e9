"""Summarise the rollouts an eval stored in a run directory (also a partial or interrupted one):
pass@1, pass@k, n and the 95% bootstrap-over-tasks interval per harness, and pass@1 per family.

    python benchmarks/suite_calibration.py RUN_DIR [--k 2] [--json]

The calibration itself is `harnessrl eval` (see docs/tasks.md, "Calibration"); this reads its store,
so the figures can be taken while it runs or after it was stopped.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harnessrl.rollout.pass_at_k import CI_METHOD, summarize
from harnessrl.store import RunStore
from harnessrl.tasks import load_tasks


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run_dir", type=Path)
    p.add_argument("--k", type=int, default=2)
    p.add_argument("--step", type=int, default=None, help="Only rollouts of this step (a training run's 0 = before).")
    p.add_argument("--split", default="", help="Only rollouts of tasks of this split (test, paraphrase, ...).")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    tasks = {t.id: t for t in load_tasks("builtin:all")}
    with RunStore(args.run_dir) as store:
        records = [r for r in store.list_rollouts(step=args.step)
                   if r.task_id in tasks and (not args.split or r.split == args.split)]
    out = {}
    for harness in sorted({r.harness for r in records}):
        rs = [r for r in records if r.harness == harness]
        n_min = min(sum(1 for x in rs if x.task_id == t) for t in {x.task_id for x in rs})
        s = summarize(rs, tasks, ks=(1, min(args.k, n_min)))
        agg = s["per_harness"][harness]
        out[harness] = {**{k: v for k, v in agg.items() if k != "statuses"}, "statuses": agg["statuses"],
                        "per_family": {f: round(a["pass@1"], 3) for f, a in s["per_family"].items()}}
    if args.json:
        print(json.dumps({"ci_method": CI_METHOD, "per_harness": out}))
        return
    print(f"95% CI: {CI_METHOD}")
    for h, a in out.items():
        ks = [k for k in a if k.startswith("pass@") and k[5:].isdigit()]
        lo, hi = a["pass@1_ci95"]
        print(f"{h}: " + " ".join(f"{k} {a[k]:.3f}" for k in ks) + f" [{lo:.3f}, {hi:.3f}] tasks {a['n_tasks']} "
              f"rollouts {a['n_rollouts']} passed {a['passed']} statuses {a['statuses']}")
        print("   per family: " + ", ".join(f"{f} {v:.2f}" for f, v in sorted(a["per_family"].items())))


if __name__ == "__main__":
    main()
