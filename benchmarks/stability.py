"""Stability benchmark: a long GRPO run from the default model, and whether it collapsed.

    .venv/bin/python benchmarks/stability.py run [--config configs/stability.yaml] [key=value ...]
    .venv/bin/python benchmarks/stability.py analyse RUN_DIR [--png docs/images/stability.png]
    .venv/bin/python benchmarks/stability.py run --config configs/long.yaml   (the 200-step run)

`run` starts `harnessrl train` (60 steps, held-out pass@1 every 10; resumable with
`output.run_dir=RUN_DIR --resume`), then analyses the run. `analyse` works on any run directory,
finished or not, so a cut-short run still reports how far it got. One figure, six panels: train
reward, held-out pass@1 (per eval set and harness), entropy, grad norm, the trainer/engine gap
(mean |dlogp| and KL(engine||trainer)), clip and importance-sampling fractions. Pass (no collapse): held-out pass@1 never falls more
than 10 points below its best so far, and entropy does not reach ~0 (< 0.02) while reward is flat.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.is_file() else []


def series(recs: list[dict], key: str, sub: str | None = None) -> tuple[list[int], list[float]]:
    """(steps, values) of `key`; `sub` picks one entry of a dict value ("a/b" walks two levels and
    takes pass@1 at the end: eval_sets' set/harness), else a dict is averaged over its entries."""
    xs, ys = [], []
    for r in recs:
        v = r.get(key)
        if sub is not None:
            for part in sub.split("/"):
                v = v.get(part) if isinstance(v, dict) else None
            if isinstance(v, dict):
                v = v.get("pass@1")
        elif isinstance(v, dict):  # mean over harnesses
            v = sum(v.values()) / len(v) if v else None
        if isinstance(v, (int, float)):
            xs.append(r["step"])
            ys.append(float(v))
    return xs, ys


def verdict(recs: list[dict]) -> dict:
    """The pass criteria on what the run recorded."""
    _, ev = series(recs, "eval")
    best, worst_drop = 0.0, 0.0
    for v in ev:
        best = max(best, v)
        worst_drop = max(worst_drop, best - v)
    _, ent = series([r for r in recs if r["step"] > 0], "entropy")
    _, rw = series([r for r in recs if r["step"] > 0], "reward")
    tail = rw[-5:]
    flat = len(tail) >= 3 and max(tail) - min(tail) < 0.05
    collapsed_entropy = bool(ent) and min(ent[-3:]) < 0.02 and flat
    steps = max((r["step"] for r in recs), default=0)
    return {"steps": steps, "evals": len(ev), "eval_first": ev[0] if ev else None, "eval_best": best if ev else None,
            "eval_last": ev[-1] if ev else None, "max_drop_below_best": worst_drop,
            "entropy_first": ent[0] if ent else None, "entropy_last": ent[-1] if ent else None,
            "entropy_collapse": collapsed_entropy,
            "passed": worst_drop <= 0.10 + 1e-9 and not collapsed_entropy}


def eval_keys(recs: list[dict]) -> list[tuple[str, str | None, str]]:
    """The held-out curves: one per eval set and harness when the run has several sets, else one
    per harness (`eval`), else the mean."""
    sets: dict[str, list[str]] = {}
    for r in recs:
        for name, by_harness in (r.get("eval_sets") or {}).items():
            for h in by_harness if isinstance(by_harness, dict) else ():
                sets.setdefault(name, [])
                if h not in sets[name]:
                    sets[name].append(h)
    if sets:
        return [("eval_sets", f"{name}/{h}", f"{h} {name}") for name, hs in sets.items() for h in hs]
    harnesses = sorted({h for r in recs for h in (r.get("eval") or {}) if isinstance(r.get("eval"), dict)})
    return [("eval", h, h) for h in harnesses] or [("eval", None, "mean")]


def plot(recs: list[dict], out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [r for r in recs if r["step"] > 0]
    fig, axes = plt.subplots(1, 6, figsize=(26, 3.6))
    panels = [
        ("train reward (mean over harnesses)", [("reward", None, "reward"), ("pass_rate", None, "pass rate")], train),
        ("held-out pass@1 per harness and set", eval_keys(recs), recs),
        ("entropy (sampled tokens)", [("entropy", None, "entropy")], train),
        ("grad norm (before clipping)", [("grad_norm", None, "grad norm")], train),
        ("trainer/engine gap", [("abs_logp_gap", None, "mean |dlogp|"), ("mismatch_kl", None, "KL(engine||trainer)")],
         train),
        ("clip / IS", [("clip_frac", None, "clip fraction"), ("is_weight", None, "mean TIS weight - 1"),
                       ("is_capped", None, "TIS capped fraction"), ("is_kept", None, "MIS kept fraction")], train),
    ]
    for ax, (name, keys, rs) in zip(axes, panels):
        for key, sub, label in keys:
            xs, ys = series(rs, key, sub)
            if key == "is_weight":
                ys = [y - 1 for y in ys]
            if xs:
                ax.plot(xs, ys, marker="o", markersize=2.5, label=label)
        if name == "trainer/engine gap":
            ax.axhline(0.015, color="r", lw=0.8, ls="--", label="KL warn (0.015)")
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)


def analyse(run_dir: Path, png: Path | None) -> dict:
    recs = load(run_dir)
    if not recs:
        raise SystemExit(f"{run_dir} has no metrics.jsonl rows yet")
    v = verdict(recs)
    png = png or run_dir / "stability.png"
    plot(recs, png, f"{run_dir.name}: {v['steps']} steps")
    print(json.dumps(v, indent=1))
    print(f"figure: {png}")
    print("step  reward  eval   entropy  |dlogp|  mKL      clip   is_w   gnorm")
    for r in recs:
        rw = series([r], "reward")[1]
        ev = series([r], "eval")[1]
        print(f"{r['step']:>4}  {rw[0] if rw else float('nan'):.3f}  {ev[0] if ev else float('nan'):.3f}  "
              f"{r.get('entropy', float('nan')):.4f}  {r.get('abs_logp_gap', float('nan')):.4f}   "
              f"{r.get('mismatch_kl', float('nan')):.5f}  {r.get('clip_frac', float('nan')):.3f}  "
              f"{r.get('is_weight', float('nan')):.3f}  {r.get('grad_norm', float('nan')):.2f}")
    for key, sub, label in eval_keys(recs):
        xs, ys = series(recs, key, sub)
        print(f"held-out {label}: " + "  ".join(f"{x}:{y:.3f}" for x, y in zip(xs, ys)))
    return v


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--config", default=str(ROOT / "configs" / "stability.yaml"))
    r.add_argument("--resume", action="store_true")
    r.add_argument("overrides", nargs="*")
    a = sub.add_parser("analyse")
    a.add_argument("run_dir", type=Path)
    a.add_argument("--png", type=Path, default=None)
    args = ap.parse_args()
    if args.cmd == "analyse":
        analyse(args.run_dir, args.png)
        return
    cmd = [sys.executable, "-m", "harnessrl.app", "train", "--config", args.config, *args.overrides]
    if args.resume:
        cmd.append("--resume")
    rc = subprocess.call(cmd)
    runs = sorted((p for p in (ROOT / "runs").glob("*-*") if (p / "metrics.jsonl").is_file()),
                  key=lambda p: p.stat().st_mtime)  # the newest run directory
    dirs = [o.split("=", 1)[1] for o in args.overrides if o.startswith("output.run_dir=")]
    run_dir = Path(dirs[0]) if dirs else (runs[-1] if runs else None)
    if run_dir is not None and (run_dir / "metrics.jsonl").is_file():
        analyse(run_dir, None)
    raise SystemExit(rc)


if __name__ == "__main__":
    main()
