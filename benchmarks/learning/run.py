"""Learning benchmark: GRPO (mixed harnesses) and PPO from the default model, fixed seeds.

Runs `harnessrl train` for each config, then prints held-out pass@1 per harness before vs after
and the curve (train reward and eval pass@1 per step) from the run's metrics.jsonl.

    .venv/bin/python benchmarks/learning/run.py [--configs configs/learning_mixed.yaml configs/ppo_builtin.yaml]
                                                [--out runs/bench_learning] [key=value ...]
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def summarise(run_dir: Path) -> str:
    recs = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    evals = [(r["step"], r["eval"]) for r in recs if r.get("eval")]
    lines = [f"## {run_dir.name}"]
    if evals:
        (s0, first), (s1, last) = evals[0], evals[-1]
        lines.append(f"held-out pass@1 (step {s0} -> step {s1}):")
        for h in sorted(first):
            lines.append(f"  {h:<16} {100 * first[h]:5.1f}% -> {100 * last.get(h, 0):5.1f}% "
                         f"({100 * (last.get(h, 0) - first[h]):+.1f} pts)")
    lines.append("curve (step: train reward per harness | eval pass@1):")
    for r in recs:
        rw = " ".join(f"{h}={v:.2f}" for h, v in r.get("reward", {}).items())
        ev = " ".join(f"{h}={v:.2f}" for h, v in r.get("eval", {}).items())
        t = sum(r.get("time", {}).values())
        lines.append(f"  {r['step']:>3}: {rw or '-':<40} | {ev or '-':<30} ({t:.0f}s)")
    return "\n".join(lines)


def train(config: str, run_dir: Path, overrides: list[str]) -> None:
    """`harnessrl train` on a config into run_dir, resuming when the run dir already holds a run."""
    t0 = time.time()
    cmd = [sys.executable, "-m", "harnessrl.app", "train", "--config", str(ROOT / config),
           f"output.run_dir={run_dir}", *overrides]
    if (run_dir / "harnessrl.sqlite").exists():
        cmd.append("--resume")
    child = subprocess.Popen(cmd, cwd=ROOT)
    # a SIGTERM to this script stops the run the way `harnessrl train` handles it (the harnesses end
    # with their sandboxes, the engine shuts down), instead of leaving it running on its own
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: child.send_signal(signum))
    try:
        rc = child.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
    if rc != 0:
        raise subprocess.CalledProcessError(rc, cmd)
    print(f"{config}: {time.time() - t0:.0f} s wall")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", nargs="+", default=["configs/learning_mixed.yaml", "configs/ppo_builtin.yaml"])
    ap.add_argument("--out", default="runs/bench_learning")
    ap.add_argument("--summarise-only", action="store_true")
    args, overrides = ap.parse_known_args()
    for cfg in args.configs:
        run_dir = ROOT / args.out / Path(cfg).stem
        if not args.summarise_only:
            train(cfg, run_dir, overrides)
        print(summarise(run_dir))


if __name__ == "__main__":
    main()
