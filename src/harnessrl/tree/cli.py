"""Commands of the tree stage (registered by harnessrl.cli). Keep top-level imports light.

    harnessrl tree show RUN_DIR --task T [--group G] [--step S] [--estimator trained|grpo|tree_grpo|none]
                        [--html out.html] [--tokenizer auto|none|DIR] [--all]
    harnessrl tree stats RUN_DIR [--json] [--task T] [--step S]
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

ESTIMATOR_CHOICES = ("trained", "grpo", "tree_grpo", "none")

tree_app = typer.Typer(help="Prefix trees of recorded groups: terminal/HTML views and sharing stats.",
                       no_args_is_help=True)


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the top-level app: `tree show`, `tree stats`."""
    app.add_typer(tree_app, name="tree")


def load_decoder(spec: str, console: Console, run_model: str | None = None):
    """A token decoder for previews: a HF tokenizer (lazy transformers import) or the ids.

    ``auto``: the run's model (``model.path`` of the run config stored in the run), else the
    default model's tokenizer."""
    from harnessrl.tree.view_text import ids_decode

    if spec == "none":
        return ids_decode
    try:
        from transformers import AutoTokenizer

        if spec == "auto" and run_model:
            from harnessrl.engine.model import resolve_model

            spec = str(resolve_model(run_model))
        elif spec == "auto":
            from harnessrl.engine.model import smollm2_tokenizer_dir

            spec = str(smollm2_tokenizer_dir())
        tok = AutoTokenizer.from_pretrained(spec)
    except Exception as err:  # noqa: BLE001 - any failure: previews fall back to ids, never a traceback
        console.print(f"[yellow]no tokenizer ({type(err).__name__}: {err}); showing token ids. "
                      f"Pass --tokenizer DIR (an HF model dir) or --tokenizer none.[/yellow]")
        return ids_decode
    return lambda ids: tok.decode(list(ids), skip_special_tokens=False)


def _open(run_dir: Path, console: Console):
    from harnessrl.tree.groups import RunNotFound, open_store

    try:
        return open_store(run_dir)
    except RunNotFound as err:
        console.print(f"[red]{err}[/red]")
        raise typer.Exit(2) from None


def _run_model(store) -> str | None:
    """The model path of the run config a training run stored (None: default model / not recorded)."""
    cfg = store.get_meta("config")
    model = cfg.get("model") if isinstance(cfg, dict) else None
    return model.get("path") if isinstance(model, dict) else None


def _estimate(tree, estimator: str):
    """Advantages recomputed on a tree with the estimator's own defaults (None: "none")."""
    from harnessrl.algo.estimator import EstimatorOnly, estimate

    return None if estimator == "none" else estimate(tree, EstimatorOnly(estimator))


def trained_pairs(store, step: int | None = None, task: str | None = None, group: str | None = None):
    """(tree, advantages) as the training steps trained them (of `step`, else of every step the run
    recorded): each tree rebuilt from the store with the step's rewards and filters, and checked
    against the trained tree's fingerprint. Nothing for runs that trained no step."""
    from harnessrl.algo.trained import load_trained, trained_steps, tree_fingerprint
    from harnessrl.tree.filters import FilterConfig
    from harnessrl.tree.groups import rebuild_trees

    for s in [step] if step is not None else trained_steps(store.run_dir):
        trained = load_trained(store.run_dir, s)
        if trained is None:
            continue
        wanted = {t.group_id: t for t in trained.trees if group is None or t.group_id == group}
        rewards = {gid: t.rewards for gid, t in wanted.items()}
        for gid, tree in rebuild_trees(store, s, rewards, FilterConfig(**trained.filters)):
            if task is not None and tree.task_id != task:
                continue
            if tree_fingerprint(tree) != wanted[gid].fingerprint:
                raise ValueError(f"group {gid} of step {s}: the stored calls no longer build the tree it trained")
            yield tree, wanted[gid].view


def tree_pairs(store, task: str | None, group: str | None, step: int | None, estimator: str, show_all: bool):
    """(tree, advantages or None) of the matching groups. "trained": the trained pairs where the run
    recorded them (training runs; the step's own filters, so `show_all` does not apply), else grpo."""
    from harnessrl.algo.trained import trained_steps
    from harnessrl.tree.filters import FilterConfig
    from harnessrl.tree.groups import iter_group_trees

    steps = trained_steps(store.run_dir)
    if estimator == "trained" and (step in steps if step is not None else steps):
        yield from trained_pairs(store, step, task, group)
        return
    for _, _, tree in iter_group_trees(store, task=task, group=group, step=step,
                                       filters=FilterConfig(prune=not show_all)):
        yield tree, _estimate(tree, "grpo" if estimator == "trained" else estimator)


@tree_app.command("show")
def show(
    run_dir: Annotated[Path, typer.Argument(help="Run directory (holds harnessrl.sqlite).")],
    task: str | None = typer.Option(None, "--task", "-t", help="Task id (required if the run has several)."),
    group: str | None = typer.Option(None, "--group", "-g", help="Only this group id."),
    step: int | None = typer.Option(None, "--step", help="Only rollouts of this training step."),
    estimator: str = typer.Option("trained", "--estimator", "-e",
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
    from harnessrl.tree.groups import group_rollouts, run_rollouts
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


def write_tree_page(store, out: Path, title: str, decode, task: str | None = None, group: str | None = None,
                    step: int | None = None, estimator: str = "trained", show_all: bool = False) -> int:
    """One self-contained HTML page with the trees of the matching groups (`tree_pairs`); returns how many."""
    from harnessrl.tree.view_html import page, tree_html

    pages = [tree_html(tree, decode, adv) for tree, adv in tree_pairs(store, task, group, step, estimator, show_all)]
    if pages:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(page(pages, title), encoding="utf-8")
        tmp.replace(out)
    return len(pages)


def _write_html_page(store, run_dir: Path, html_out: Path, task: str | None, group: str | None, step: int | None,
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
    task: str | None = typer.Option(None, "--task", "-t", help="Only this task."),
    step: int | None = typer.Option(None, "--step", help="Only rollouts of this training step."),
) -> None:
    """Tree statistics summed over the run: unique vs per-call vs per-rollout tokens, branches, filters."""
    from rich.progress import track
    from rich.table import Table

    from harnessrl.tree.groups import group_rollouts, iter_group_trees, run_rollouts
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
