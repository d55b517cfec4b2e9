"""The demo's config with this wave's throughput optimisations on and off, in one invocation.

    on   the defaults: vLLM's prefix cache, bf16 compute over the fp32 master weights where the
         engine serves bf16 (model.compute_dtype auto), block tree attention (model.attention auto)
    off  engine.prefix_caching=false model.compute_dtype=float32 model.attention=sdpa-dense

Each arm is one `harnessrl train` of the config for --steps steps into OUT/<arm> (the same seed and
task plan), then `harnessrl profile --json` of it. The arms sample different rollouts (every reply is
sampled, and dynamic sampling replaces a different number of groups), so besides each phase's wall
the table divides by what the phase did: wall per rollout it ran, the update's wall per 1,000 trained
tokens, the engine's computed share of the prompt tokens it was sent. The last column is off / on.
Arms run in the order given (--arms off,on to check that order does not decide it); a finished arm
directory is re-profiled, not re-run (--fresh to run it again).

    .venv/bin/python benchmarks/optimisations.py [--config configs/demo.yaml] [--steps 3]
        [--out runs/optimisations] [--arms on,off] [--fresh] [KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
ARMS = {
    "on": [],
    "off": ["engine.prefix_caching=false", "model.compute_dtype=float32", "model.attention=sdpa-dense"],
}
PHASES = ("rollout", "branch", "train", "sync", "eval", "checkpoint")


def harnessrl() -> list[str]:
    exe = Path(sys.executable).with_name("harnessrl")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "harnessrl.app.cli"]


def run_arm(name: str, config: Path, steps: int, out: Path, extra: list[str], fresh: bool) -> tuple[Path, float | None]:
    """Train one arm (unless it finished before); (its run dir, the command's wall s or None)."""
    run_dir = out / name
    done = run_dir / "report.md"
    if done.is_file() and not fresh:
        return run_dir, None
    if run_dir.exists():
        shutil.rmtree(run_dir)
    cmd = [*harnessrl(), "train", "--config", str(config), f"loop.steps={steps}", f"output.run_dir={run_dir}",
           *ARMS[name], *extra]
    print(f"[{time.strftime('%H:%M:%S')}] {name}: {' '.join(cmd[1:])}", flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"{name}: harnessrl train exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    print(f"[{time.strftime('%H:%M:%S')}] {name}: done in {wall:.0f} s", flush=True)
    return run_dir, wall


def profile(run_dir: Path) -> dict:
    """What `harnessrl profile RUN_DIR --json` prints."""
    from harnessrl.profile.run_profile import profile_run_dir
    from harnessrl.profile.tables import profile_json

    return profile_json(profile_run_dir(run_dir), str(run_dir))


def trained_tokens(run_dir: Path) -> float:
    from harnessrl.report.metrics_log import read_jsonl

    return float(sum(r["tokens_trained"] for r in read_jsonl(run_dir / "metrics.jsonl")
                     if isinstance(r.get("tokens_trained"), (int, float))))


def figures(prof: dict, tokens: float) -> dict[str, float | None]:
    """The rows of the table for one arm."""
    ph, n = prof["phases"], prof["rollouts"]

    def wall(key: str) -> float:
        return float((ph.get(key) or {}).get("wall_s") or 0.0)

    def per(value: float, count: float, scale: float = 1.0) -> float | None:
        return scale * value / count if count else None

    pc = prof["prefix_cache"]
    sent = pc.get("prompt_tokens_sent") or 0
    run_wall = float(prof["step_wall_s"])  # every step's phases, the baseline eval's included
    return {
        "run phases wall s": run_wall,
        "wall s per step": run_wall / max(prof["steps"], 1),
        **{f"{k} wall s": wall(k) for k in PHASES},
        "rollout phase s per rollout": per(wall("rollout"), n.get("rollout", 0)),
        "branch phase s per branch": per(wall("branch"), n.get("branch", 0)),
        "eval s per eval rollout": per(wall("eval"), n.get("eval", 0)),
        "update s per 1k trained tokens": per(wall("train"), tokens, 1000.0),
        "trained tokens": tokens,
        "rollouts (train, branch, eval)": float(sum(n.values())),
        "engine computed % of prompt tokens": per(float(pc.get("prompt_tokens_computed") or 0), sent, 100.0),
        "engine CPU s per rollout": (prof["rollout_components"].get("engine") or {}).get("cpu_s_per"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "demo.yaml")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "optimisations")
    ap.add_argument("--arms", default="on,off", help="comma-separated, in the order they run: on, off")
    ap.add_argument("--fresh", action="store_true", help="run finished arms again")
    ap.add_argument("overrides", nargs="*", help="KEY=VALUE for both arms (e.g. loop.eval_size=10)")
    args = ap.parse_args()
    arms = [a for a in args.arms.split(",") if a]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        sys.exit(f"unknown arm(s) {unknown}: choose from {sorted(ARMS)}")
    rows: dict[str, dict[str, float | None]] = {}
    for name in arms:
        run_dir, _ = run_arm(name, args.config, args.steps, args.out, args.overrides, args.fresh)
        rows[name] = figures(profile(run_dir), trained_tokens(run_dir))
    keys = list(next(iter(rows.values())))
    print(f"\n{args.config.name}, {args.steps} steps; off = {' '.join(ARMS['off'])}")
    head = f"| {'figure':<36} | " + " | ".join(f"{a:>9}" for a in arms)
    ratio = "on" in rows and "off" in rows
    print(head + (" | off / on |" if ratio else " |"))
    print("|" + "---|" * (len(arms) + 1 + ratio))
    for k in keys:
        vals = [rows[a][k] for a in arms]
        cells = " | ".join(f"{v:>9.3f}" if isinstance(v, float) and v < 100 else
                           (f"{v:>9.0f}" if isinstance(v, float) else f"{'-':>9}") for v in vals)
        line = f"| {k:<36} | {cells} |"
        if ratio:
            on, off = rows["on"][k], rows["off"][k]
            line += f" {off / on:>7.2f}x |" if on and off is not None else "        - |"
        print(line)


if __name__ == "__main__":
    main()
