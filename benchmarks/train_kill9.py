"""`harnessrl train` killed with SIGKILL at random points mid-step, then resumed: is any step lost or
repeated? (Issue 12: kill -9 under load.)

Each trial starts a 5-step run of a tiny random model with the in-process fake collector (every
rollout takes `--rollout-s` seconds, so a step spends its time in collection, the update, the
weight sync and the checkpoint as a real one does), waits until step `--after` is recorded, then a
random further delay (uniform in [0, --spread-s]) so the kill lands anywhere inside the next step,
SIGKILLs it and resumes it to the end. Checked per trial, from the store and the last checkpoint:
every step 0..5 recorded once, policy versions 1..5 in order, the metrics JSONL holds each step
once, and the optimizer took exactly one update per step that trained (none repeated or lost).

    PYTHONPATH=src .venv/bin/python benchmarks/train_kill9.py [--trials 10] [--spread-s 4] [--load 2]

`--load N` runs N busy-loop processes beside it (the "under load" part). Prints one line per trial
and a summary: trials, where the kills landed, steps lost, steps repeated, failed resumes.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAKES = ROOT / "tests" / "run"  # run_fake.py + fakes.py: the loop with an in-process fake collector
sys.path.insert(0, str(ROOT / "src"))

STEPS = 5


def overrides(model: Path, run_dir: Path) -> list[str]:
    return [f"model.path={model}", "engine.type=hf", f"output.run_dir={run_dir}", "output.tensorboard=false",
            f"loop.steps={STEPS}", "loop.groups_per_step=2", "loop.n_per_group=3", "loop.eval_size=2",
            "loop.eval_every=2", "serve.max_tokens=6", "filters.truncated=keep", "optimizer.lr=1e-3",
            "algorithm.token_budget=64", "harnesses=[{name: builtin, weight: 1}, {name: mini-swe-agent, weight: 1}]"]


def recorded_steps(run_dir: Path) -> list[int]:
    from harnessrl.store.run_store import RunStore

    if not (run_dir / "harnessrl.sqlite").exists():
        return []
    with RunStore(run_dir) as st:
        return [s for s, _ in st.list_steps()]


def trial(model: Path, run_dir: Path, rollout_s: float, after: int, spread_s: float, rng: random.Random) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(FAKES), str(ROOT / "src")])}
    args = [sys.executable, str(FAKES / "run_fake.py"), str(rollout_s)]
    proc = subprocess.Popen(args + ["fresh", *overrides(model, run_dir)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.time() + 600
    while time.time() < deadline and proc.poll() is None and max(recorded_steps(run_dir), default=-1) < after:
        time.sleep(0.05)
    delay = rng.uniform(0, spread_s)
    time.sleep(delay)
    if proc.poll() is not None:
        return {"error": "the run ended before the kill: " + proc.stderr.read().decode()[-300:]}
    before = recorded_steps(run_dir)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    out = subprocess.run(args + ["resume", *overrides(model, run_dir)], env=env, capture_output=True, timeout=900)
    if out.returncode != 0:
        return {"error": "resume failed: " + out.stderr.decode()[-300:], "killed_during": max(before, default=0) + 1}
    return check(run_dir) | {"killed_during": max(before, default=0) + 1, "delay_s": round(delay, 2)}


def check(run_dir: Path) -> dict:
    import torch

    from harnessrl.store.run_store import RunStore

    with RunStore(run_dir) as st:
        recs = dict(st.list_steps())
    lines = [json.loads(x)["step"] for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    state = torch.load(run_dir / "checkpoints" / f"step_{STEPS:06d}" / "trainer.pt", weights_only=False)
    updates = sum(1 for s in range(1, STEPS + 1) if recs.get(s, {}).get("groups_trained", 0) > 0)
    taken = {int(s["step"]) for s in state["optimizer"]["state"].values()}
    return {"lost": sorted(set(range(STEPS + 1)) - set(recs)),
            "jsonl_repeats": len(lines) - len(set(lines)),
            "versions_ok": [recs[s].get("policy_version") for s in range(1, STEPS + 1) if s in recs]
            == list(range(1, STEPS + 1)),
            "optimizer_ok": taken == {updates}}


def spin(stop_at: float) -> None:
    while time.time() < stop_at:
        pass


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--rollout-s", type=float, default=0.3)
    ap.add_argument("--after", type=int, default=1, help="kill after this step is recorded (plus the random delay)")
    ap.add_argument("--spread-s", type=float, default=4.0)
    ap.add_argument("--load", type=int, default=0, help="busy processes beside the run")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from harnessrl.engine import make_tiny_model

    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="harnessrl-kill9-"))
    model = make_tiny_model(work / "model", seed=3)
    hogs = [multiprocessing.Process(target=spin, args=(time.time() + 3600,), daemon=True) for _ in range(args.load)]
    for h in hogs:
        h.start()
    results = []
    try:
        for i in range(args.trials):
            res = trial(model, work / f"run{i}", args.rollout_s, args.after, args.spread_s, rng)
            results.append(res)
            print(f"trial {i}: {res}", flush=True)
    finally:
        for h in hogs:
            h.terminate()
    ok = [r for r in results if "error" not in r]
    print(f"\n{len(results)} trials (load {args.load} busy processes, kill {args.after}+U(0,{args.spread_s}) s): "
          f"kills landed in steps {sorted(r['killed_during'] for r in results if 'killed_during' in r)}; "
          f"steps lost {sum(len(r['lost']) for r in ok)}, JSONL repeats {sum(r['jsonl_repeats'] for r in ok)}, "
          f"version order broken {sum(not r['versions_ok'] for r in ok)}, optimizer updates repeated/lost "
          f"{sum(not r['optimizer_ok'] for r in ok)}, failed trials {len(results) - len(ok)}")


if __name__ == "__main__":
    main()
