"""Commands of the engine stage (registered by harnessrl.app.main). Keep top-level imports light."""

from __future__ import annotations

import typer

from harnessrl.app.cli_style import CliApp

model_app = CliApp(help="Model checkpoints: resolve or build the default model.", no_args_is_help=True)


@model_app.command("prepare")
def prepare(
    model: str | None = typer.Option(
        None,
        "--model",
        "-m",
        help="smollm2-135m-instruct (default), an HF checkpoint dir, or a cached HF id.",
    ),
) -> None:
    """Build (once) or resolve a model and print its local HF checkpoint directory."""
    from rich.console import Console

    from harnessrl.engine.model import DEFAULT_MODEL, ModelNotFound, resolve_model

    console = Console(stderr=True)
    try:
        with console.status(f"resolving {model or DEFAULT_MODEL} (first build of the default takes ~30 s)"):
            path = resolve_model(model)
    except ModelNotFound as err:
        console.print(f"[red]error:[/red] {err}")
        raise typer.Exit(code=2) from None
    console.print(f"[green]model ready:[/green] {model or DEFAULT_MODEL}")
    typer.echo(str(path))


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the top-level app."""
    app.add_typer(model_app, name="model")
