"""Harness dynamics: how each harness's traits show in a training step's rollouts.

The method leaves open how a harness shapes training. Per harness and step this measures, from what
the store recorded (the step's groups: rollouts and calls, branches included) and the trees the
step trained:

- calls per rollout (served calls: the policy sampled in them), prompt tokens per call, completion
  tokens per call and per rollout;
- the context used: per rollout the largest prompt + completion of its calls (mean and max);
- failure modes: rollouts per status, failed calls per error kind (the proxy's typed errors, e.g.
  too_long, call_budget), and completions cut at the token limit (finish "length");
- the share of tokens that train: decision tokens of the trained trees over the completion tokens
  the harness's rollouts sampled (what the filters and groups without contrast leave out; a
  branch's replayed calls, proxy/replay.py, were sampled by its parent and count there only), and
  over the trees' unique tokens (how much of the computed context carries loss: harness prompts
  weigh here).

The figures are part of each step's record (`StepRecord.dynamics`, JSON key "dynamics"), so they
survive a resume; the report shows them as one table and one plot (`dynamics_lines`, `plot_dynamics`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from harnessrl.store.records import CallRecord, served_calls

if TYPE_CHECKING:
    from harnessrl.rollout.groups import PlannedGroup
    from harnessrl.tree.nodes import PrefixTree

PLOT_STEM = "harness_dynamics"
MAX_TABLE_STEPS = 10  # per harness; a longer run's table shows this many steps, first and last included
DYNAMICS_COLUMNS = ("step", "harness", "rollouts", "calls/rollout", "prompt tok/call", "completion tok/rollout",
                    "context mean", "context max", "statuses", "call errors", "truncated calls",
                    "trained/sampled", "trained/tree")


def harness_dynamics(groups: Sequence[PlannedGroup], trees: Sequence[PrefixTree]) -> dict[str, dict[str, Any]]:
    """{harness: figures} over the step's recorded groups and the trees it trained."""
    calls_by_rollout: dict[str, list[CallRecord]] = {}
    for g in groups:
        for c in g.calls:
            calls_by_rollout.setdefault(c.rollout_id, []).append(c)
    acc: dict[str, dict[str, Any]] = {}
    for g in groups:
        for r in g.rollouts:
            a = acc.setdefault(r.harness, {"calls": [], "prompt": [], "completion": [], "per_rollout": [],
                                           "context": [], "status": Counter(), "errors": Counter(), "length": 0,
                                           "sampled": 0, "replayed": 0})
            a["status"][r.status] += 1
            served = served_calls(calls_by_rollout.get(r.rollout_id, []))
            for c in calls_by_rollout.get(r.rollout_id, ()):
                if c.status != "ok":
                    a["errors"][str((c.meta or {}).get("error_kind") or "other")] += 1
            a["calls"].append(len(served))
            a["prompt"] += [len(c.prompt_ids) for c in served]
            a["completion"] += [len(c.sampled_ids) for c in served]
            a["per_rollout"].append(sum(len(c.sampled_ids) for c in served))
            a["context"].append(max((len(c.prompt_ids) + len(c.sampled_ids) for c in served), default=0))
            a["length"] += sum(c.finish_reason == "length" for c in served)
            replayed = [c for c in served if "of" in ((c.meta or {}).get("replay") or {})]
            a["replayed"] += len(replayed)
            a["sampled"] += sum(len(c.sampled_ids) for c in served) - sum(len(c.sampled_ids) for c in replayed)
    trained: Counter[str] = Counter()
    tree_tokens: Counter[str] = Counter()
    for t in trees:
        trained[t.harness] += int(t.stats.decision_tokens)
        tree_tokens[t.harness] += int(t.stats.unique_tokens)
    out: dict[str, dict[str, Any]] = {}
    for h, a in sorted(acc.items()):
        sampled = a["sampled"]
        out[h] = {"rollouts": float(len(a["calls"])), "calls_per_rollout": _mean(a["calls"]),
                  "prompt_tokens_per_call": _mean(a["prompt"]), "completion_tokens_per_call": _mean(a["completion"]),
                  "completion_tokens_per_rollout": _mean(a["per_rollout"]), "context_mean": _mean(a["context"]),
                  "context_max": float(max(a["context"], default=0)), "truncated_calls": float(a["length"]),
                  "replayed_calls": float(a["replayed"]),
                  "status": {k: float(v) for k, v in sorted(a["status"].items())},
                  "call_errors": {k: float(v) for k, v in sorted(a["errors"].items())},
                  "tokens_sampled": float(sampled), "tokens_trained": float(trained[h]),
                  "tokens_tree": float(tree_tokens[h]),
                  "trained_share": trained[h] / sampled if sampled else 0.0,
                  "tree_share": trained[h] / tree_tokens[h] if tree_tokens[h] else 0.0}
    return out


def _mean(xs: Sequence[float]) -> float:
    return float(sum(xs) / len(xs)) if xs else 0.0


def _counts(d: dict[str, float] | None) -> str:
    return ", ".join(f"{k} {v:.0f}" for k, v in sorted((d or {}).items(), key=lambda kv: -kv[1])) or "-"


def step_dynamics(records: list[dict[str, Any]]) -> list[tuple[int, dict[str, dict[str, Any]]]]:
    """(step, {harness: figures}) of the records that hold dynamics, by step."""
    out = [(int(r["step"]), r["dynamics"]) for r in records if isinstance(r.get("dynamics"), dict)]
    return sorted(out, key=lambda x: x[0])


def dynamics_rows(records: list[dict[str, Any]]) -> list[list[Any]]:
    """One row per step and harness (DYNAMICS_COLUMNS), numbers as numbers (the tracker's table)."""
    rows: list[list[Any]] = []
    for step, per_harness in step_dynamics(records):
        for h, d in sorted(per_harness.items()):
            rows.append([step, h, d.get("rollouts"), d.get("calls_per_rollout"), d.get("prompt_tokens_per_call"),
                         d.get("completion_tokens_per_rollout"), d.get("context_mean"), d.get("context_max"),
                         _counts(d.get("status")), _counts(d.get("call_errors")), d.get("truncated_calls"),
                         d.get("trained_share"), d.get("tree_share")])
    return rows


def shown_steps(steps: Sequence[int], most: int = MAX_TABLE_STEPS) -> list[int]:
    """At most `most` of the steps, evenly spread, first and last included."""
    steps = sorted(set(steps))
    if len(steps) <= most:
        return steps
    picks = {steps[round(i * (len(steps) - 1) / (most - 1))] for i in range(most)}
    return sorted(picks)


def dynamics_lines(records: list[dict[str, Any]], plot: Path | None = None, run_dir: Path | None = None) -> list[str]:
    """The report's section: one table (harness, then step) and the plot (empty without dynamics)."""
    by_step = step_dynamics(records)
    if not by_step:
        return []
    keep = set(shown_steps([s for s, _ in by_step]))
    lines = ["## Harness dynamics (training rollouts per step)", "",
             "Calls and tokens per rollout, the context used (largest prompt + completion of a rollout's calls), "
             "how rollouts ended and calls failed, and the share of tokens that train: decision tokens of the "
             "trained trees over the completion tokens sampled, and over the trees' unique tokens."
             + ("" if len(keep) == len(by_step) else f" {len(keep)} of {len(by_step)} steps shown."), "",
             "| harness | step | rollouts | calls / rollout | prompt tok / call | completion tok / rollout | "
             "context mean / max | statuses | call errors | truncated | trained / sampled | trained / tree |",
             "|---|---:|---:|---:|---:|---:|---:|---|---|---:|---:|---:|"]
    harnesses = sorted({h for _, per_h in by_step for h in per_h})
    for h in harnesses:
        for step, per_h in by_step:
            d = per_h.get(h)
            if d is None or step not in keep:
                continue
            lines.append(f"| {h} | {step} | {d.get('rollouts', 0):.0f} | {d.get('calls_per_rollout', 0):.2f} | "
                         f"{d.get('prompt_tokens_per_call', 0):.0f} | {d.get('completion_tokens_per_rollout', 0):.0f} | "
                         f"{d.get('context_mean', 0):.0f} / {d.get('context_max', 0):.0f} | "
                         f"{_counts(d.get('status'))} | {_counts(d.get('call_errors'))} | "
                         f"{d.get('truncated_calls', 0):.0f} | {100 * d.get('trained_share', 0):.1f}% | "
                         f"{100 * d.get('tree_share', 0):.1f}% |")
    lines.append("")
    if plot is not None and run_dir is not None:
        lines += [f"![{plot.stem}]({plot.relative_to(run_dir)})", ""]
    return lines


PANELS = (("calls_per_rollout", "calls per rollout"), ("prompt_tokens_per_call", "prompt tokens per call"),
          ("completion_tokens_per_rollout", "completion tokens per rollout"),
          ("context_mean", "context used (mean of rollout max)"), ("not_ok_share", "rollouts not ok (share)"),
          ("trained_share", "trained / sampled tokens"))


def _value(d: dict[str, Any], key: str) -> float | None:
    if key == "not_ok_share":
        status = d.get("status") or {}
        total = sum(status.values())
        return (total - status.get("ok", 0.0)) / total if total else None
    v = d.get(key)
    return float(v) if isinstance(v, (int, float)) else None


def plot_dynamics(records: list[dict[str, Any]], out_dir: Path) -> Path | None:
    """One PNG of six panels (PANELS), a line per harness over the steps; None without dynamics."""
    by_step = step_dynamics(records)
    if not by_step:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    harnesses = sorted({h for _, per_h in by_step for h in per_h})
    fig, axes = plt.subplots(2, 3, figsize=(12, 6))
    for ax, (key, title) in zip(axes.flat, PANELS):
        for h in harnesses:
            pts = [(s, v) for s, per_h in by_step if h in per_h and (v := _value(per_h[h], key)) is not None]
            if pts:
                ax.plot([s for s, _ in pts], [v for _, v in pts], marker="o", markersize=3, label=h)
        ax.set_title(title, fontsize=9)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=7)
    for ax in axes[1]:
        ax.set_xlabel("step")
    fig.suptitle("harness dynamics per step (training rollouts)", fontsize=10)
    fig.tight_layout()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{PLOT_STEM}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
