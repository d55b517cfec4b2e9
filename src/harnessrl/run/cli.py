"""Commands of the train stage (registered by harnessrl.cli). Keep top-level imports light."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the top-level app: `train`, `sft`, `transfer` and `config validate`."""
    app.command("train")(train)
    app.command("sft")(sft)
    app.command("transfer")(transfer)
    app.command("profile")(profile)
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


def sft(
    runs: list[Path] = typer.Argument(..., help="run dirs whose recorded calls to train on"),
    out: Path = typer.Option(..., "--out", "-o", help="output dir: <out>/policy (HF checkpoint) and <out>/sft.json"),
    mode: str = typer.Option("rejection", "--mode", help="rejection: passing rollouts; distill: every served call"),
    model: str = typer.Option(None, "--model", help="the student (HF dir or id; default: the default model)"),
    epochs: int = typer.Option(3, "--epochs", help="passes over the data"),
    lr: float = typer.Option(1e-5, "--lr", help="AdamW learning rate"),
    batch_trees: int = typer.Option(0, "--batch-trees", help="trees per optimizer step (0: all, one step an epoch)"),
    token_budget: int = typer.Option(2048, "--token-budget", help="tokens per packed chunk"),
    min_reward: float = typer.Option(1.0, "--min-reward", help="rejection: a rollout passes at this reward"),
    harness: str = typer.Option(None, "--harness", help="rejection: only this harness's rollouts"),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Supervised fine-tuning on recorded ids (cold start): tree-packed, writes a plain HF checkpoint."""
    from harnessrl.engine import ModelNotFound
    from harnessrl.run.sft import SFTOptions, run_sft
    from harnessrl.run.sft_data import SFTDataError

    console = Console()
    opts = SFTOptions(mode=mode, model=model, epochs=epochs, lr=lr, batch_trees=batch_trees,
                      token_budget=token_budget, min_reward=min_reward, harness=harness, seed=seed)
    try:
        result = run_sft(list(runs), out, opts, log=console.print)
    except (SFTDataError, ModelNotFound) as err:
        console.print(f"[red]sft refused:[/red] {err}")
        raise typer.Exit(2) from None
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}")
    console.print(f"[green]done[/green] mean NLL {result.nll_before:.4f} -> {result.nll_after:.4f} over "
                  f"{result.sampled_tokens} sampled tokens; checkpoint {result.policy_dir} "
                  f"(start RL from it: harnessrl train model.path={result.policy_dir})")


def transfer(
    runs: list[Path] = typer.Argument(..., help="training run dirs (one row each)"),
    out: Path = typer.Option(..., "--out", "-o", help="output dir: transfer.md, transfer.json, transfer.png"),
) -> None:
    """The transfer matrix: each run's held-out pass@1 change through every harness and eval set."""
    from harnessrl.run.transfer import TransferError, matrix_markdown, write_transfer

    console = Console()
    try:
        rows = write_transfer(list(runs), out)
    except TransferError as err:
        console.print(f"[red]transfer refused:[/red] {err}")
        raise typer.Exit(2) from None
    console.print(matrix_markdown(rows), markup=False, highlight=False)
    console.print(f"[green]wrote[/green] {out / 'transfer.md'}, {out / 'transfer.png'}")


def profile(run_dir: Path = typer.Argument(..., help="a run dir (harnessrl train's output.run_dir)")) -> None:
    """Cost budget of a run: wall and CPU seconds per step phase and per rollout component, and the
    share of the prompt tokens the engine's prefix cache served (run/profile.py)."""
    from harnessrl.run.profile import profile_run_dir, render_table
    from harnessrl.store.schema import DB_NAME

    console = Console()
    if not (run_dir / DB_NAME).is_file():
        console.print(f"[red]profile refused:[/red] {run_dir} holds no run (no harnessrl.sqlite)")
        raise typer.Exit(2)
    for part in render_table(profile_run_dir(run_dir), run_dir.name):
        console.print(part)


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
