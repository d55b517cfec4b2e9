"""Commands of the train stage (registered by harnessrl.cli). Keep top-level imports light."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the top-level app: `train` and `config validate`."""
    app.command("train")(train)
    config_app = typer.Typer(help="Run configs: validate YAML files against the RunConfig schema.")
    config_app.command("validate")(validate)
    config_app.command("show")(show)
    app.add_typer(config_app, name="config")


def train(
    config: Path = typer.Option(None, "--config", "-c", help="YAML run config (configs/*.yaml)"),
    overrides: list[str] = typer.Argument(None, help="dotted key=value overrides, e.g. loop.steps=3"),
    resume: bool = typer.Option(False, "--resume", help="continue the run in output.run_dir after a crash"),
    verbose: bool = typer.Option(False, "--verbose", "-v",
                                 help="library output (vLLM, transformers, harnesses) here, not in run.log"),
) -> None:
    """Run RL training: rollouts -> trees -> advantages -> tree-packed update -> weight sync."""
    from harnessrl.run.config import ConfigError, load_config

    console = Console()
    try:
        cfg = load_config(config, overrides or [])
    except ConfigError as err:
        console.print(f"[red]config error:[/red] {err}")
        raise typer.Exit(2) from None
    import signal

    from harnessrl.rollout.jobs import RolloutsFailed
    from harnessrl.run.loop import TrainError, run_training
    from harnessrl.sandbox.base import SandboxUnavailable

    def _stop(signum, frame):  # noqa: ARG001 - SIGTERM unwinds like Ctrl-C, so engines are shut down
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    try:
        result = run_training(cfg, resume=resume, console=console, verbose=verbose)
    except (TrainError, RolloutsFailed, SandboxUnavailable) as err:
        console.print(f"[red]training failed:[/red] {err}")
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        console.print("[yellow]stopped[/yellow]; continue with --resume (the last recorded step is kept)")
        raise typer.Exit(130) from None
    console.print(f"[green]done[/green] open {result.report.with_suffix('.html')} in a browser")


def validate(files: list[Path] = typer.Argument(..., help="config files to check")) -> None:
    """Validate run configs; exits 1 when any file is invalid."""
    from harnessrl.run.config import validate_files

    console = Console()
    results = validate_files([str(f) for f in files])
    bad = 0
    for path, msg in results.items():
        if msg == "ok":
            console.print(f"[green]ok[/green]   {path}")
        else:
            bad += 1
            console.print(f"[red]FAIL[/red] {msg}")
    raise typer.Exit(1 if bad else 0)


def show(
    config: Path = typer.Argument(None, help="YAML run config (omit for the defaults)"),
    overrides: list[str] = typer.Argument(None, help="dotted key=value overrides"),
) -> None:
    """Print the fully resolved config (defaults + file + overrides) as YAML."""
    import yaml

    from harnessrl.run.config import ConfigError, load_config

    try:
        cfg = load_config(config, overrides or [])
    except ConfigError as err:
        Console().print(f"[red]config error:[/red] {err}")
        raise typer.Exit(2) from None
    typer.echo(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
