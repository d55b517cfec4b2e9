"""Rich tables for an eval summary (rollout.pass_at_k.summarize / summarize_sets)."""

from __future__ import annotations

from typing import Any


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def _ci(r: dict[str, Any]) -> str:
    ci = r.get("pass@1_ci95")
    return "-" if not ci else f"[{ci[0]:.3f}, {ci[1]:.3f}]"


def _ks(rows: Any) -> list[str]:
    return sorted({k for r in rows for k in r if k.startswith("pass@") and k[5:].isdigit()}, key=lambda k: int(k[5:]))


def summary_table(title: str, rows: dict[str, dict[str, Any]]) -> Any:
    from rich.table import Table

    ks = _ks(rows.values())
    table = Table(title=title)
    for col in ("name", ks[0] if ks else "pass@1", "95% CI", *ks[1:], "mean reward", "tasks", "rollouts", "statuses"):
        table.add_column(col)
    for name, r in rows.items():
        statuses = ", ".join(f"{s} {c}" for s, c in sorted(r.get("statuses", {}).items()))
        table.add_row(name, _fmt(r.get(ks[0] if ks else "pass@1")), _ci(r), *(_fmt(r.get(k)) for k in ks[1:]),
                      _fmt(r.get("mean_reward")), _fmt(r.get("n_tasks", 1)), _fmt(r.get("n_rollouts", r.get("n"))),
                      statuses)
    return table


def sets_table(per_harness: dict[str, dict[str, dict[str, Any]]]) -> Any:
    """One row per (harness, task set): pass@1, its 95% interval, pass@k, tasks, rollouts."""
    from rich.table import Table

    ks = _ks(r for sets in per_harness.values() for r in sets.values())
    table = Table(title="per harness and task set (95% CI: bootstrap over tasks)")
    for col in ("harness", "set", "pass@1", "95% CI", *[k for k in ks if k != "pass@1"], "tasks", "rollouts"):
        table.add_column(col)
    for harness, sets in sorted(per_harness.items()):
        for name, r in sets.items():
            table.add_row(harness, name, _fmt(r.get("pass@1")), _ci(r), *(_fmt(r.get(k)) for k in ks if k != "pass@1"),
                          _fmt(r.get("n_tasks")), _fmt(r.get("n_rollouts")))
    return table


def print_summary(summary: dict[str, Any], stderr: bool = False) -> None:
    from rich.console import Console

    console = Console(stderr=stderr)
    console.print(summary_table("per category", summary["per_category"]))
    console.print(summary_table("per harness", summary["per_harness"]))
    overall = ", ".join(f"{k} {summary[k]:.3f}" for k in summary if k.startswith("pass@") and k[5:].isdigit())
    console.print(f"[bold]overall[/bold] ({summary['n_tasks']} tasks, {summary['n_rollouts']} rollouts): {overall}"
                  f", pass@1 95% CI {_ci(summary)} ({summary.get('ci_method', '')})")


def print_sets(result: dict[str, Any], stderr: bool = False) -> None:
    """Several task sets: a family table per set, then the harness x set table."""
    from rich.console import Console

    console = Console(stderr=stderr)
    for name, summary in result["sets"].items():
        console.print(summary_table(f"{name}: per family", summary["per_family"]))
    console.print(sets_table(result["per_harness"]))


def print_rollouts(summary: dict[str, Any], run_dir: Any) -> None:
    """The end of `harnessrl rollout`: the per-harness table `eval` prints (pass@1, its 95% interval,
    mean reward, statuses), then one line with where the rollouts are."""
    from rich.console import Console

    console = Console()
    console.print(summary_table("per harness", summary["per_harness"]))
    statuses = ", ".join(f"{s} {c}" for s, c in sorted(summary["statuses"].items()))
    console.print(f"{summary['n_rollouts']} rollouts ({statuses}) in {run_dir}: pass@1 {_fmt(summary.get('pass@1'))}, "
                  f"mean reward {_fmt(summary.get('mean_reward'))}; list them with "
                  f"[bold]harnessrl calls {run_dir}[/bold]")
