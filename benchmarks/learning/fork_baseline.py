"""Start a new learning run from another run's baseline (its step 0: the held-out eval of the base
model), so an ablation of the TRAINING settings (reward, lr, algorithm, ...) does not pay for the
same baseline eval again (~20 min per 192 rollouts on a 2-core box).

    .venv/bin/python benchmarks/learning/fork_baseline.py SRC_RUN DEST_RUN --config CONFIG [key=value ...]

DEST_RUN gets a copy of SRC_RUN's store with only step 0 (its record and its eval rollouts and
calls); then `harnessrl train --config CONFIG output.run_dir=DEST_RUN --resume` trains from the base
model. Refused when the new config differs from SRC_RUN's in anything the baseline depends on
(model, engine, render, serve, sandbox, harnesses, tasks, and the eval sizes), so the before/after
comparison stays the same model on the same tasks through the same harnesses.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from harnessrl.config import load_config  # noqa: E402

BASELINE_SECTIONS = ("model", "render", "serve", "sandbox", "harnesses", "tasks")
BASELINE_LOOP_KEYS = ("eval_size", "eval_samples", "max_tokens", "max_turns", "rollout_timeout_s")
ENGINE_KEYS = ("type", "model", "max_model_len")  # dtype may differ: docs/benchmarks.md says when it did


def baseline_differences(old: dict, new: dict) -> list[str]:
    """The settings the baseline eval depends on that differ between two resolved configs."""
    diffs = [s for s in BASELINE_SECTIONS if old.get(s) != new.get(s)]
    diffs += [f"loop.{k}" for k in BASELINE_LOOP_KEYS if old["loop"].get(k) != new["loop"].get(k)]
    diffs += [f"engine.{k}" for k in ENGINE_KEYS if old["engine"].get(k) != new["engine"].get(k)]
    return diffs


def fork(src: Path, dest: Path, new_cfg: dict) -> None:
    db_path = src / "harnessrl.sqlite"
    if not db_path.is_file():
        raise SystemExit(f"{src} holds no run (no harnessrl.sqlite)")
    if dest.exists():
        raise SystemExit(f"{dest} exists: choose a new directory")
    with sqlite3.connect(db_path) as db:
        old_cfg = json.loads(db.execute("select value from meta where key='config'").fetchone()[0])
        steps = {s for (s,) in db.execute("select step from steps")}
    if 0 not in steps:
        raise SystemExit(f"{src} has no recorded step 0 (baseline eval)")
    diffs = baseline_differences(old_cfg, new_cfg)
    if diffs:
        raise SystemExit(f"the baseline of {src} does not apply: {', '.join(diffs)} differ")
    dest.mkdir(parents=True)
    with sqlite3.connect(db_path) as db, sqlite3.connect(dest / "harnessrl.sqlite") as out:
        db.backup(out)  # a consistent copy even while SRC is open
    with sqlite3.connect(dest / "harnessrl.sqlite") as out:
        out.execute("delete from steps where step > 0")
        out.execute("delete from rollouts where step > 0")
        out.execute("delete from calls where rollout_id not in (select rollout_id from rollouts)")
        out.execute("insert or replace into meta(key, value) values('forked_from', ?)", (json.dumps(str(src)),))
    with sqlite3.connect(dest / "harnessrl.sqlite") as out:
        out.execute("vacuum")
    for name in ("run.log",):
        if (src / name).is_file():
            shutil.copy(src / name, dest / f"baseline-{name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src", type=Path)
    ap.add_argument("dest", type=Path)
    ap.add_argument("--config", required=True)
    args, overrides = ap.parse_known_args()
    cfg = load_config(ROOT / args.config, overrides + [f"output.run_dir={args.dest}"])
    fork(args.src, args.dest, cfg.model_dump(mode="json"))
    print(f"{args.dest}: step 0 of {args.src}; train it with "
          f"`harnessrl train --config {args.config} output.run_dir={args.dest} --resume {' '.join(overrides)}`")


if __name__ == "__main__":
    main()
