"""Commands of the train stage (registered by harnessrl.app.main). Keep top-level imports light."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from harnessrl.app.cli_style import CliApp
from rich.console import Console

from harnessrl.run.sft import SFTOptions

SFT = SFTOptions()  # the sft defaults, written once (run/sft.py); the flags show and take them


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the top-level app: `train`, `sft`, `transfer`, `experiment` and `config validate`."""
    app.command("train")(train)
    app.command("sft")(sft)
    app.command("transfer")(transfer)
    app.command("experiment")(experiment)
    from harnessrl.app.profile import profile  # the cost budget (run/profile.py)

    app.command("profile")(profile)
    config_app = CliApp(help="Run configs: validate YAML files against the RunConfig schema.")
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
    mode: str = typer.Option(SFT.mode, "--mode", help="rejection: passing rollouts; distill: every served call"),
    model: Optional[str] = typer.Option(SFT.model, "--model", help="the student (HF dir or id; default: the default model)"),
    epochs: int = typer.Option(SFT.epochs, "--epochs", help="passes over the data"),
    lr: float = typer.Option(SFT.lr, "--lr", help="AdamW learning rate"),
    batch_trees: int = typer.Option(SFT.batch_trees, "--batch-trees", help="trees per optimizer step (0: all, one step an epoch)"),
    token_budget: int = typer.Option(SFT.token_budget, "--token-budget", help="tokens per packed chunk"),
    min_reward: float = typer.Option(SFT.min_reward, "--min-reward", help="rejection: a rollout passes at this reward"),
    harness: Optional[str] = typer.Option(SFT.harness, "--harness", help="rejection: only this harness's rollouts"),
    seed: int = typer.Option(SFT.seed, "--seed"),
) -> None:
    """Supervised fine-tuning on recorded ids (cold start): tree-packed, writes a plain HF checkpoint."""
    from harnessrl.engine import ModelNotFound
    from harnessrl.run.sft import run_sft
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


def experiment(
    args: list[str] = typer.Argument(None, help="an experiment file (configs/experiments/*.yaml) and/or "
                                                "key=value overrides for every run"),
    config: Path = typer.Option(None, "--config", "-c", help="the base run config (replaces the file's)"),
    arms: list[str] = typer.Option(None, "--arm", help="NAME='key=value ...': an arm (adds to or replaces the file's)"),
    seeds: str = typer.Option(None, "--seeds", help="comma-separated seeds, e.g. 0,1,2 (default: the file's, else 0,1,2)"),
    out: Path = typer.Option(None, "--out", "-o", help="the experiment directory (default: the file's)"),
    report_only: bool = typer.Option(False, "--report-only", help="only write the results of the finished runs"),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="library output here, not in each run's run.log"),
) -> None:
    """Arms x seeds of training runs against one shared baseline eval per seed; each arm's held-out
    change over seeds (hierarchical bootstrap) as experiment.md + experiment.png. Finished runs are skipped."""
    import signal

    from harnessrl.run.experiment import ExperimentError, load_spec, plan_runs, run_experiment, write_experiment_results
    from harnessrl.run.shared_baseline import BaselineError

    console = Console()
    files = [a for a in args or [] if "=" not in a]
    if len(files) > 1:
        console.print(f"[red]experiment refused:[/red] one experiment file at most, got {files}")
        raise typer.Exit(2)
    try:
        spec = load_spec(Path(files[0]) if files else None, config, arms or [], seeds, out,
                         [a for a in args or [] if "=" in a])
        baselines, runs = plan_runs(spec)
    except ExperimentError as err:
        console.print(f"[red]experiment refused:[/red] {err}")
        raise typer.Exit(2) from None
    if not report_only:
        from harnessrl.rollout.jobs import RolloutsFailed
        from harnessrl.run.loop import TrainError
        from harnessrl.sandbox.base import SandboxUnavailable

        def _stop(signum, frame):  # noqa: ARG001 - SIGTERM unwinds like Ctrl-C, so engines are shut down
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, _stop)
        console.print(f"[bold]harnessrl experiment[/bold] {len(spec.arms)} arms x {len(spec.seeds)} seeds "
                      f"+ {len(baselines)} baseline evals -> {spec.out}")
        try:
            run_experiment(spec, console, verbose=verbose)
        except (ExperimentError, BaselineError) as err:
            console.print(f"[red]experiment refused:[/red] {err}")
            raise typer.Exit(2) from None
        except (TrainError, RolloutsFailed, SandboxUnavailable) as err:
            console.print(f"[red]experiment stopped:[/red] {err}\nRun the same command again to continue "
                          "(finished runs are skipped, an interrupted one resumes).")
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            console.print("[yellow]stopped[/yellow]; run the same command again to continue")
            raise typer.Exit(130) from None
    results, missing = write_experiment_results(spec, runs)
    text = (Path(spec.out) / "experiment.md").read_text()
    console.print(text, markup=False, highlight=False)
    console.print(f"[green]wrote[/green] {Path(spec.out) / 'experiment.md'}"
                  + (f", {Path(spec.out) / 'experiment.png'}" if results else ""))
    if missing and report_only:
        raise typer.Exit(1)


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
