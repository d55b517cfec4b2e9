"""The report's "Informative groups" section: per step, how many of the groups that trained could
teach (mixed outcomes), what the step paid for groups without contrast, what dynamic sampling
dropped and why, which tasks the sampler picked (run/step_groups.py fills `SamplingStats`), and how
well the sampler's difficulty estimate predicted which picked groups would have contrast (Brier
score of P(mixed) at the pick against two constants, over the run's own groups: the run's mixed
share, known only once it ended, and the mixed share of the steps before the pick's).

The plots are two panels of report/run_report.py's PANELS (`informative`, `wasted_rollouts`); this
module writes the table and links them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from harnessrl.rollout.difficulty import brier, point_p_mixed
from harnessrl.report.dynamics import shown_steps
from harnessrl.report.record import SamplingStats, step_records

PLOT_STEMS = ("informative", "wasted_rollouts")  # report/run_report.py PANELS shown in this section
MAX_PICKS = 6  # picks named per step; the rest are counted


def step_sampling(records: list[dict[str, Any]]) -> list[tuple[int, SamplingStats]]:
    """(step, its sampling stats) of the training steps that recorded them, by step."""
    return [(step, rec.sampling) for step, rec in step_records(records) if step > 0 and rec.sampling is not None]


def picks_text(picks: Sequence[dict[str, Any]], most: int = MAX_PICKS) -> str:
    """"task (harness) p=0.50, ..." for the first `most` picks, then "+N more"."""
    named = [f"{p.get('task', '?')} ({p.get('harness', '?')}) p={float(p.get('p', 0.0)):.2f}" for p in picks[:most]]
    rest = len(picks) - len(named)
    return ", ".join(named) + (f", +{rest} more" if rest > 0 else "") or "-"


def causal_shares(rows: Sequence[tuple[int, list[bool]]]) -> list[float]:
    """Per pick, in step order: the mixed share of the picks of the steps before its own,
    (1 + mixed) / (2 + picks) (0.5 at the first step)."""
    out: list[float] = []
    mixed = seen = 0
    for _, outcomes in sorted(rows, key=lambda r: r[0]):
        out += [(1 + mixed) / (2 + seen)] * len(outcomes)
        mixed, seen = mixed + sum(outcomes), seen + len(outcomes)
    return out


def calibration(rows: Sequence[tuple[int, SamplingStats]]) -> dict[str, float] | None:
    """Brier scores of the run's picked groups: the sampler's P(mixed) recorded at the pick, the
    pick's p as a point estimate (1 - p^n - (1 - p)^n), the run's mixed share as a constant (known
    only afterwards: the best constant there is) and the mixed share of the steps before (a constant
    the sampler could have used); None when no pick recorded both."""
    per_step = [(step, [p for p in s.sampler_picks
                        if isinstance(p.get("p_mixed"), (int, float)) and isinstance(p.get("mixed"), bool)])
                for step, s in rows]
    picks = [p for _, ps in sorted(per_step, key=lambda r: r[0]) for p in ps]
    if not picks:
        return None
    share = sum(p["mixed"] for p in picks) / len(picks)
    causal = causal_shares([(step, [p["mixed"] for p in ps]) for step, ps in per_step])
    return {"groups": float(len(picks)), "mixed share": share,
            "posterior": brier((float(p["p_mixed"]), p["mixed"]) for p in picks) or 0.0,
            "point": brier((point_p_mixed(float(p["p"]), int(p.get("n", 0))), p["mixed"]) for p in picks) or 0.0,
            "constant": brier((share, p["mixed"]) for p in picks) or 0.0,
            "causal": brier((c, p["mixed"]) for c, p in zip(causal, picks)) or 0.0}


def calibration_lines(rows: Sequence[tuple[int, SamplingStats]]) -> list[str]:
    """Markdown: the difficulty estimate's Brier table (empty without recorded predictions)."""
    c = calibration(rows)
    if c is None:
        return []
    verdict = "better" if c["posterior"] < c["constant"] else "no better"
    causal = "better" if c["posterior"] < c["causal"] else "no better"
    return [f"Difficulty estimate ({c['groups']:.0f} picked groups, {c['mixed share']:.0%} mixed): P(mixed) "
            f"predicted at the pick is {verdict} than the run's mixed share as a constant, and {causal} than "
            "the mixed share of the steps before (Brier, lower is better).",
            "", "| predictor of a mixed group | Brier |", "|---|---:|",
            f"| P(mixed) at the pick (the sampler's estimate) | {c['posterior']:.3f} |",
            f"| constant: the run's mixed share, {c['mixed share']:.2f} (known once the run ended) | "
            f"{c['constant']:.3f} |",
            f"| constant: the mixed share of the steps before the pick's | {c['causal']:.3f} |",
            f"| the pick's p as a point estimate, 1 - p^n - (1 - p)^n | {c['point']:.3f} |", ""]


def _dropped(d: dict[str, float]) -> str:
    return ", ".join(f"{k} {v:.0f}" for k, v in sorted(d.items(), key=lambda kv: -kv[1])) or "-"


def sampling_lines(records: list[dict[str, Any]], plots: Sequence[Path] = (), run_dir: Path | None = None) -> list[str]:
    """Markdown: the section's table (one row per shown step), its totals and its plots (empty
    when no step recorded sampling stats)."""
    rows = step_sampling(records)
    if not rows:
        return []
    keep = set(shown_steps([s for s, _ in rows]))
    trained = sum(s.informative_groups for _, s in rows) / len(rows)
    wasted, sampled = sum(s.wasted_rollouts for _, s in rows), sum(s.rollouts_sampled for _, s in rows)
    dropped: dict[str, float] = {}
    for _, s in rows:
        for k, v in s.dropped_groups.items():
            dropped[k] = dropped.get(k, 0.0) + v
    lines = ["## Informative groups", "",
             "Informative = the group's rewards differ (mixed outcomes): only those carry a GRPO signal. "
             "Trained = informative groups that trained per slot of loop.groups_per_step; sampled = "
             "informative groups over all groups the step ran (replacements included); wasted = rollouts "
             "(branches included) of groups without contrast; picks = the sampler's tasks with their "
             "estimated pass rate p at planning."
             + ("" if len(keep) == len(rows) else f" {len(keep)} of {len(rows)} steps shown."), "",
             f"Over {len(rows)} steps: {trained:.0%} of the batch informative on average, "
             f"{wasted:.0f} of {sampled:.0f} rollouts without contrast"
             + (f", dropped groups: {_dropped(dropped)}" if dropped else "")
             + (f", {rescued:.0f} rescue groups" if (rescued := sum(s.rescue_groups or 0 for _, s in rows)) else "")
             + (f", {topped:.0f} top-up groups" if (topped := sum(s.topup_groups or 0 for _, s in rows)) else "")
             + (f", {extra / len(rows):.1f} extra rollouts a step (dynamic sampling)"
                if (extra := sum(s.extra_rollouts or 0 for _, s in rows)) else "")
             + ".", "", *calibration_lines(rows),
             "| step | informative (trained) | informative (sampled) | groups sampled (+extra) | wasted rollouts | "
             "dropped groups | mean picked p | branch points mixed | picks |",
             "|---:|---:|---:|---:|---:|---|---:|---:|---|"]
    for step, s in rows:
        if step not in keep:
            continue
        mixed = "-" if s.branch_mixed is None else f"{s.branch_mixed:.0%} of {s.branch_points or 0:.0f}"
        lines.append(f"| {step} | {s.informative_groups:.0%} | {s.sampled_informative:.0%} | "
                     f"{s.groups_sampled:.0f} (+{s.extra_groups:.0f}) | {s.wasted_rollouts:.0f} / "
                     f"{s.rollouts_sampled:.0f} | {_dropped(s.dropped_groups)} | {s.pick_pass_rate:.2f} | {mixed} | "
                     f"{picks_text(s.sampler_picks)} |")
    lines.append("")
    if run_dir is not None:
        shown = [p for p in plots if Path(p).stem in PLOT_STEMS]
        lines += [f"![{p.stem}]({Path(p).relative_to(run_dir)})" for p in shown] + ([""] if shown else [])
    return lines
