"""End-of-run PNG plots (matplotlib, Agg) and a short markdown report from the step records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PANELS = (  # (file stem, title, metric keys; "x/*" = every sub-key of x)
    ("reward", "mean reward per harness (train rollouts)", ["reward/*"]),
    ("pass_rate", "pass rate per harness (train rollouts)", ["pass_rate/*"]),
    ("eval", "held-out pass@1 per harness", ["eval/*"]),
    ("loss", "policy loss", ["loss", "value_loss"]),
    ("kl_entropy", "KL to reference / entropy", ["kl", "entropy"]),
    ("clip_is", "clip fraction / mean IS weight", ["clip_frac", "is_weight", "is_kept"]),
    ("logp_gap", "mean |logp_trainer - logp_engine| (sampled tokens)", ["abs_logp_gap"]),
    ("tokens", "tokens: trained (decisions) / computed / unique tree / per-call", [
        "tokens_trained", "tokens_computed", "unique_tree_tokens", "per_call_tokens", "per_rollout_tokens"]),
    ("time", "step time split (s)", ["time/*"]),
)


def _series(records: list[dict[str, Any]], key: str) -> dict[str, tuple[list[int], list[float]]]:
    out: dict[str, tuple[list[int], list[float]]] = {}
    for rec in records:
        step = rec["step"]
        if key.endswith("/*"):
            sub = rec.get(key[:-2])
            items = sub.items() if isinstance(sub, dict) else ()
            for name, v in items:
                if isinstance(v, (int, float)):
                    xs, ys = out.setdefault(f"{key[:-2]}/{name}", ([], []))
                    xs.append(step)
                    ys.append(float(v))
        elif isinstance(rec.get(key), (int, float)):
            xs, ys = out.setdefault(key, ([], []))
            xs.append(step)
            ys.append(float(rec[key]))
    return out


def write_plots(records: list[dict[str, Any]], out_dir: Path) -> list[Path]:
    """One PNG per panel that has data; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for stem, title, keys in PANELS:
        series = {}
        for k in keys:
            series.update(_series(records, k))
        if not series:
            continue
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for name, (xs, ys) in sorted(series.items()):
            ax.plot(xs, ys, marker="o", markersize=3, label=name)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = out_dir / f"{stem}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written


def eval_table(records: list[dict[str, Any]]) -> tuple[dict[str, float], dict[str, float]]:
    """(first, last) held-out pass@1 per harness."""
    evals = [(r["step"], r["eval"]) for r in records if isinstance(r.get("eval"), dict) and r["eval"]]
    if not evals:
        return {}, {}
    evals.sort(key=lambda x: x[0])
    return evals[0][1], evals[-1][1]


def write_report(records: list[dict[str, Any]], run_dir: Path, plots: list[Path], title: str,
                 config_yaml: str) -> Path:
    """A short markdown report: before/after held-out pass@1 per harness, totals, plot links."""
    before, after = eval_table(records)
    train_steps = [r for r in records if r["step"] > 0]
    lines = [f"# {title}", ""]
    if before:
        lines += ["## Held-out pass@1 per harness", "", "| harness | before | after | change |", "|---|---|---|---|"]
        for h in sorted(set(before) | set(after)):
            b, a = before.get(h), after.get(h)
            delta = f"{100 * (a - b):+.1f} pts" if a is not None and b is not None else "-"
            lines.append(f"| {h} | {_pct(b)} | {_pct(a)} | {delta} |")
        lines.append("")
    if train_steps:
        tot = {k: sum(float(r.get("time", {}).get(k, 0.0)) for r in train_steps)
               for k in ("rollout", "tree", "train", "sync", "eval", "checkpoint")}
        unique = sum(r.get("unique_tree_tokens", 0) for r in train_steps)
        per_call = sum(r.get("per_call_tokens", 0) for r in train_steps)
        lines += ["## Run", "", f"- steps: {len(train_steps)}",
                  "- time (s): " + ", ".join(f"{k} {v:.0f}" for k, v in tot.items()),
                  f"- unique tree tokens {unique:.0f} vs per-call tokens {per_call:.0f}"
                  + (f" ({per_call / unique:.1f}x)" if unique else ""), ""]
    if plots:
        lines += ["## Plots", ""] + [f"![{p.stem}]({p.relative_to(run_dir)})" for p in plots] + [""]
    lines += ["## Config", "", "```yaml", config_yaml.rstrip(), "```", ""]
    path = Path(run_dir) / "report.md"
    path.write_text("\n".join(lines))
    return path


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"
