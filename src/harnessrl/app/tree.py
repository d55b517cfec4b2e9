"""Commands of the tree stage (registered by harnessrl.app.main). Keep top-level imports light.

    harnessrl tree show RUN_DIR --task T [--group G] [--step S] [--estimator trained|grpo|tree_grpo|none]
                        [--html out.html] [--tokenizer auto|none|DIR] [--all]
    harnessrl tree stats RUN_DIR [--json] [--task T] [--step S]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from harnessrl.algo.views import ESTIMATOR_CHOICES, tree_pairs, write_tree_page
from harnessrl.app.cli_style import CliApp
from harnessrl.tree.decode import load_decoder
from harnessrl.tree.decode import run_model as _run_model

if TYPE_CHECKING:
    from harnessrl.store.run_store import RunStore

tree_app = CliApp(help="Prefix trees of recorded groups: terminal/HTML views and sharing stats.",
                       no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the top-level app: `tree show`, `tree stats`."""
    app.add_typer(tree_app, name="tree")


def _open(run_dir: Path, console: Console) -> RunStore:
    from harnessrl.tree.run_trees import RunNotFound, open_store

    try:
        return open_store(run_dir)
    except RunNotFound as err:
        console.print(f"[red]{err}[/red]")
        raise typer.Exit(2) from None


@tree_app.command("show")
def show(
    run_dir: Annotated[Path, typer.Argument(help="Run directory (holds harnessrl.sqlite).")],
    task: str | None = typer.Option(None, "--task", help="Task id (required if the run has several)."),
    group: str | None = typer.Option(None, "--group", "-g", help="Only this group id."),
    step: int | None = typer.Option(None, "--step", help="Only rollouts of this training step."),
    estimator: str = typer.Option("trained", "--estimator",
                                  help="Advantages shown: trained (what the training step trained on; "
                                       "runs that trained none: grpo) | grpo | tree_grpo | none."),
    html_out: Annotated[Path | None, typer.Option("--html", help="Write one self-contained HTML page here.")] = None,
    tokenizer: str = typer.Option("auto", "--tokenizer", help="auto (default model) | none (ids) | an HF dir."),
    show_all: bool = typer.Option(False, "--all", help="Keep filtered-only branches and trailing context."),
    width: int = typer.Option(100, "--width", help="Preview characters per node."),
    max_nodes: int = typer.Option(400, "--max-nodes", help="Nodes shown per tree in the terminal."),
) -> None:
    """Show the prefix tree(s) of a task: spans, rollouts, rewards, values and advantages.

    With --html and no --task, the page holds every task's trees (of --step, when given)."""
    from harnessrl.tree.run_trees import group_rollouts, run_rollouts
    from harnessrl.tree.view_text import render_tree

    console = Console()
    if estimator not in ESTIMATOR_CHOICES:
        console.print(f"[red]--estimator must be one of {', '.join(ESTIMATOR_CHOICES)}[/red]")
        raise typer.Exit(2)
    store = _open(run_dir, console)
    if task is None:
        tasks = sorted({g.task_id for g in group_rollouts(run_rollouts(store, step, group), None, group)})
        if html_out is not None and tasks:  # one page can hold every task's trees
            _write_html_page(store, run_dir, html_out, None, group, step, estimator, tokenizer, show_all, console)
            return
        if len(tasks) != 1:
            listing = ", ".join(tasks) if tasks else "none recorded"
            console.print(f"[red]pass --task: this run has {len(tasks)} tasks ({listing})[/red]")
            raise typer.Exit(2)
        task = tasks[0]
    if html_out is not None:
        _write_html_page(store, run_dir, html_out, task, group, step, estimator, tokenizer, show_all, console)
        return
    decode = load_decoder(tokenizer, console, _run_model(store))
    found = 0
    for tree, adv in tree_pairs(store, task, group, step, estimator, show_all):
        found += 1
        console.print(render_tree(tree, decode, adv, width=width, max_nodes=max_nodes))
    if not found:
        console.print(f"[red]no rollouts for task {task!r}"
                      f"{'' if group is None else f' in group {group!r}'} in {run_dir}[/red]")
        raise typer.Exit(1)


def _write_html_page(store: RunStore, run_dir: Path, html_out: Path, task: str | None, group: str | None, step: int | None,
                     estimator: str, tokenizer: str, show_all: bool, console: Console) -> None:
    decode = load_decoder(tokenizer, console, _run_model(store))
    what = "all tasks" if task is None else task
    found = write_tree_page(store, html_out, f"harnessrl trees · {run_dir.name} · {what}", decode, task, group,
                            step, estimator, show_all)
    if not found:
        console.print(f"[red]no rollouts for task {task!r}"
                      f"{'' if group is None else f' in group {group!r}'} in {run_dir}[/red]")
        raise typer.Exit(1)
    console.print(f"wrote {html_out} ({found} tree{'s' if found > 1 else ''})")


@tree_app.command("stats")
def stats(
    run_dir: Annotated[Path, typer.Argument(help="Run directory (holds harnessrl.sqlite).")],
    as_json: bool = typer.Option(False, "--json", help="Print the summed stats as JSON."),
    task: str | None = typer.Option(None, "--task", help="Only this task."),
    step: int | None = typer.Option(None, "--step", help="Only rollouts of this training step."),
) -> None:
    """Tree statistics summed over the run: unique vs per-call vs per-rollout tokens, branches, filters."""
    from rich.progress import track
    from rich.table import Table

    from harnessrl.tree.run_trees import group_rollouts, iter_group_trees, run_rollouts
    from harnessrl.tree.stats import TreeStats

    console = Console(stderr=as_json)
    store = _open(run_dir, console)
    n_groups = len(group_rollouts(run_rollouts(store, step), task))
    total = TreeStats()
    trees = iter_group_trees(store, task=task, step=step)
    for _, _, tree in track(trees, total=n_groups, description="building trees", console=console,
                            disable=as_json or n_groups < 20):
        total = total + tree.stats
    d = total.to_dict()
    if as_json:
        typer.echo(json.dumps(d, indent=2))
        return
    table = Table(title=f"tree stats · {run_dir}")
    table.add_column("stat")
    table.add_column("value", justify="right")
    for k, v in d.items():
        table.add_row(k, json.dumps(v) if isinstance(v, dict) else str(v))
    console.print(table)
