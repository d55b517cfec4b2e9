"""The report's "Informative groups" section: per step, how many of the groups that trained could
teach (mixed outcomes), what the step paid for groups without contrast, what dynamic sampling
dropped and why, and which tasks the sampler picked (run/collect.py fills `SamplingStats`).

The plots are two panels of run/report.py's PANELS (`informative`, `wasted_rollouts`); this
module writes the table and links them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from harnessrl.run.dynamics import shown_steps
from harnessrl.run.record import SamplingStats, step_records

PLOT_STEMS = ("informative", "wasted_rollouts")  # run/report.py PANELS shown in this section
MAX_PICKS = 6  # picks named per step; the rest are counted


def step_sampling(records: list[dict[str, Any]]) -> list[tuple[int, SamplingStats]]:
    """(step, its sampling stats) of the training steps that recorded them, by step."""
    return [(step, rec.sampling) for step, rec in step_records(records) if step > 0 and rec.sampling is not None]


def picks_text(picks: Sequence[dict[str, Any]], most: int = MAX_PICKS) -> str:
    """"task (harness) p=0.50, ..." for the first `most` picks, then "+N more"."""
    named = [f"{p.get('task', '?')} ({p.get('harness', '?')}) p={float(p.get('p', 0.0)):.2f}" for p in picks[:most]]
    rest = len(picks) - len(named)
    return ", ".join(named) + (f", +{rest} more" if rest > 0 else "") or "-"


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
             + (f", dropped groups: {_dropped(dropped)}" if dropped else "") + ".", "",
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
