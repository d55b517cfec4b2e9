"""`harnessrl tasks list|show|validate DIR_OR_SELECTOR` and `harnessrl tasks export SPEC DIR`
(registered by harnessrl.app.main).

Selectors: builtin:train | builtin:test | builtin:all | builtin:<category>[:<split>] | builtin:<family>,
or a task directory (ClawGym or native), or a directory of task directories.
"""

from __future__ import annotations

from typing import Any

import typer

from harnessrl.app.cli_style import CliApp

tasks_app = CliApp(help="Inspect and validate tasks (built-in suite, ClawGym or native directories).",
                        no_args_is_help=True)


def _load(spec: str) -> list[Any]:
    from harnessrl.tasks.loader import load_tasks
    from harnessrl.tasks.model import TaskError

    try:
        return load_tasks(spec)
    except TaskError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(code=2) from None


@tasks_app.command("list")
def list_tasks(spec: str = typer.Argument("builtin:all", help="Directory or builtin:<selector>."),
               json_out: bool = typer.Option(False, "--json", help="One JSON object per task on stdout.")) -> None:
    """List tasks: id, category, split, instruction."""
    import json

    from rich.console import Console
    from rich.table import Table

    tasks = _load(spec)
    if json_out:
        for t in tasks:
            typer.echo(json.dumps({"id": t.id, "category": t.category, "split": t.split, "family": t.family,
                                   "instruction": t.instruction}))
        return
    table = Table(title=f"{len(tasks)} tasks from {spec}")
    for col in ("id", "category", "split", "files", "instruction"):
        table.add_column(col, overflow="fold")
    for t in tasks:
        table.add_row(t.id, t.category, t.split, str(len(t.files)), t.instruction)
    Console(emoji=False).print(table)


@tasks_app.command("show")
def show(task_id: str = typer.Argument(..., help="A task id (searched in --tasks) or a task directory."),
         tasks: str = typer.Option("builtin:all", "--tasks", help="Where to look the id up.")) -> None:
    """Show one task: instruction, files, verifier, reference solution."""
    from pathlib import Path

    from rich.console import Console

    found = _load(task_id) if Path(task_id).is_dir() else [t for t in _load(tasks) if t.id == task_id]
    if not found:
        typer.echo(f"error: no task {task_id!r} in {tasks} (see `harnessrl tasks list {tasks}`)", err=True)
        raise typer.Exit(code=2)
    t, console = found[0], Console()
    console.print(f"[bold]{t.id}[/bold]  category={t.category} split={t.split} family={t.family} "
                  f"pass: reward {t.pass_rule} {t.pass_threshold:g}  workspace at {t.input_mount_dir}")
    console.print(f"[bold]instruction:[/bold] {t.instruction}")
    for path, content in sorted(t.files.items()):
        console.print(f"[bold]file {path}[/bold] ({len(content)} bytes)", markup=True)
        console.print(content.decode(errors="replace")[:600], markup=False, highlight=False)
    v = t.verifier
    console.print(f"[bold]verifier:[/bold] kind={v.kind} command={v.command!r} files={sorted(v.files)} "
                  f"timeout={v.timeout_s:g}s")
    if "checks.json" in v.files:
        console.print(v.files["checks.json"].decode(), markup=False, highlight=False)
    console.print(f"[bold]reference solution:[/bold] {list(t.reference_solution) or 'none'}", markup=True)


@tasks_app.command("validate")
def validate(spec: str = typer.Argument(..., help="Directory or builtin:<selector>."),
             sandbox: str = typer.Option("bwrap", "--sandbox", help="bwrap (isolated) | local (no isolation)."),
             ) -> None:
    """Run each verifier on the untouched workspace (must not pass) and after the reference solution
    (must pass). Exit code 1 when a task fails validation."""
    import warnings

    from rich.console import Console
    from rich.progress import track

    from harnessrl.sandbox.base import SandboxConfig, SandboxError
    from harnessrl.rollout.task_sandbox import validate_task

    if sandbox not in ("bwrap", "local"):
        raise typer.BadParameter("--sandbox must be bwrap or local")
    warnings.simplefilter("ignore")  # the local backend's "does not isolate" warning, once is enough
    tasks, console, bad = _load(spec), Console(), 0
    try:
        for t in track(tasks, description="validating", console=console):
            result = validate_task(t, SandboxConfig(type=sandbox))
            if not result.ok:
                bad += 1
                console.print(f"[red]FAIL[/red] {t.id}: {result.error}")
    except SandboxError as e:
        console.print(f"[red]error:[/red] {e} (try --sandbox local)")
        raise typer.Exit(code=2) from None
    console.print(f"{len(tasks) - bad}/{len(tasks)} tasks valid")
    if bad:
        raise typer.Exit(code=1)


@tasks_app.command("export")
def export(spec: str = typer.Argument(..., help="Directory or builtin:<selector>, e.g. builtin:chain:test."),
           out: str = typer.Argument(..., help="Where to write one ClawGym task directory per task."),
           ) -> None:
    """Write tasks as ClawGym task directories (data_entry.json, input_files/, reward/reward.sh,
    reward/check.py), usable by any ClawGym runner and by `--tasks DIR`."""
    from pathlib import Path

    from harnessrl.tasks.clawgym import export_clawgym
    from harnessrl.tasks.model import TaskError

    tasks = _load(spec)
    try:
        written = export_clawgym(tasks, Path(out))
    except TaskError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(code=2) from None
    typer.echo(f"wrote {len(written)} ClawGym task directories to {out}")


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the top-level app."""
    app.add_typer(tasks_app, name="tasks")
