"""Rich tables for an eval summary (rollout.metrics.summarize)."""

from __future__ import annotations

from typing import Any


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def summary_table(title: str, rows: dict[str, dict[str, Any]]) -> Any:
    from rich.table import Table

    ks = sorted({k for r in rows.values() for k in r if k.startswith("pass@")}, key=lambda k: int(k[5:]))
    table = Table(title=title)
    for col in ("name", *ks, "mean reward", "tasks", "rollouts", "statuses"):
        table.add_column(col)
    for name, r in rows.items():
        statuses = ", ".join(f"{s} {c}" for s, c in sorted(r.get("statuses", {}).items()))
        table.add_row(name, *(_fmt(r.get(k)) for k in ks), _fmt(r.get("mean_reward")),
                      _fmt(r.get("n_tasks", 1)), _fmt(r.get("n_rollouts", r.get("n"))), statuses)
    return table


def print_summary(summary: dict[str, Any], stderr: bool = False) -> None:
    from rich.console import Console

    console = Console(stderr=stderr)
    console.print(summary_table("per category", summary["per_category"]))
    console.print(summary_table("per harness", summary["per_harness"]))
    overall = ", ".join(f"{k} {summary[k]:.3f}" for k in summary if k.startswith("pass@"))
    console.print(f"[bold]overall[/bold] ({summary['n_tasks']} tasks, {summary['n_rollouts']} rollouts): {overall}")
