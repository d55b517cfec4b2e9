"""Commands of the train stage (registered by harnessrl.app.main). Keep top-level imports light."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, Optional

import typer

from harnessrl.app.cli_style import CliApp
from rich.console import Console

from harnessrl.sft.fine_tune import SFTOptions

if TYPE_CHECKING:
    from types import FrameType

    from harnessrl.config import RunConfig
    from harnessrl.run.resume import ResumePlan

SFT = SFTOptions()  # the sft defaults, written once (sft/fine_tune.py); the flags show and take them


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the top-level app: `train`, `sft`, `transfer`, `experiment` and `config validate`."""
    app.command("train")(train)
    app.command("sft")(sft)
    app.command("transfer")(transfer)
    app.command("experiment")(experiment)
    from harnessrl.app.profile import profile  # the cost budget (profile/run_profile.py)

    app.command("profile")(profile)
    config_app = CliApp(help="Run configs: validate YAML files against the RunConfig schema.")
    config_app.command("validate")(validate)
    config_app.command("show")(show)
    app.add_typer(config_app, name="config")


def train(
    config: Path = typer.Option(None, "--config", "-c", help="YAML run config (configs/*.yaml)"),
    overrides: list[str] = typer.Argument(None, help="dotted key=value overrides, e.g. loop.steps=3"),
    resume: bool = typer.Option(False, "--resume", help="continue the run in output.run_dir (after a crash, or with "
                                                        "a higher loop.steps); without --config, with the config "
                                                        "it stored"),
    allow_change: list[str] = typer.Option(None, "--allow-change", metavar="KEY",
                                           help="with --resume: continue although KEY (e.g. optimizer.lr) differs "
                                                "from the run's stored config; the change is recorded in the run. "
                                                "Repeat for several."),
    verbose: bool = typer.Option(False, "--verbose", "-v",
                                 help="library output (vLLM, transformers, harnesses) here, not in run.log"),
) -> None:
    """Run RL training: rollouts -> trees -> advantages -> tree-packed update -> weight sync. The config is
    checked first (`harnessrl config validate`): nothing is created when it would fail."""
    from harnessrl.config import ConfigError, build_config, load_config
    from harnessrl.run.resume import stored_run_config

    console = Console()
    try:
        cfg = load_config(config, overrides or [])
        stored = stored_run_config(Path(cfg.output.run_dir)) if resume and config is None else None
        if stored is not None:  # --resume without --config: the run's own config, the overrides on top
            cfg = build_config(stored, overrides or [], source=f"the config stored in {cfg.output.run_dir}")
    except ConfigError as err:
        console.print(f"[red]config error:[/red] {err}")
        raise typer.Exit(2) from None
    if allow_change and not resume:
        console.print("[red]error:[/red] --allow-change applies to a resumed run: add --resume")
        raise typer.Exit(2)
    plan = resume_plan(cfg, allow_change or [], console) if resume else None
    if plan is not None and plan.complete:
        console.print(plan.complete)
        raise typer.Exit(0)
    refuse_problems(cfg, console)
    if plan is not None:
        record_resume(Path(cfg.output.run_dir), plan, console)
    import signal

    from harnessrl.errors import HarnessRLError
    from harnessrl.run.loop import run_training

    def _stop(signum: int, frame: FrameType | None) -> NoReturn:  # noqa: ARG001 - SIGTERM unwinds like Ctrl-C, so engines are shut down
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    try:
        result = run_training(cfg, resume=resume, console=console, verbose=verbose, start_model=cold_start)
    except HarnessRLError as err:  # TrainError, RolloutsFailed, SandboxUnavailable, the cold start's
        console.print(f"[red]training failed:[/red] {err}")
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        console.print("[yellow]stopped[/yellow]; continue with --resume (the last recorded step is kept)")
        raise typer.Exit(130) from None
    console.print(f"[green]done[/green] open {result.report.with_suffix('.html')} in a browser")


def cold_start(cfg: RunConfig, console: Console) -> Path | None:
    """The run's cold start (config `cold_start`: demos + SFT in <run_dir>/cold_start), or None."""
    from harnessrl.sft.cold_start import ensure_cold_start

    return ensure_cold_start(cfg, log=lambda line: console.print(line, soft_wrap=True))


def resume_plan(cfg: RunConfig, allowed: list[str], console: Console) -> ResumePlan:
    """The resume of cfg's run (run/resume.py plan_resume); a refusal is one line with the fix, exit 2."""
    from harnessrl.config import ConfigError
    from harnessrl.run.resume import plan_resume

    try:
        return plan_resume(cfg, allowed)
    except ConfigError as err:
        console.print(f"[red]resume refused:[/red] {err}", soft_wrap=True)
        raise typer.Exit(2) from None


def refuse_problems(cfg: RunConfig, console: Console) -> None:
    """Exit 2 with one line per problem when train would fail on this machine (run/preflight.py)."""
    from harnessrl.run.preflight import run_problems

    problems = run_problems(cfg)
    for problem in problems:
        console.print(f"[red]config error:[/red] {problem}", soft_wrap=True)
    if problems:
        raise typer.Exit(2)


def record_resume(run_dir: Path, plan: ResumePlan, console: Console) -> None:
    """Record the allowed changes of this resume in the run and say them."""
    from harnessrl.run.resume import CHANGES_KEY, next_attempt_number, record_changes

    record_changes(run_dir, plan.changes, next_attempt_number(run_dir))
    for change in plan.changes:
        console.print(f"[yellow]resuming with a changed setting:[/yellow] {change} (recorded in the run's "
                      f"meta {CHANGES_KEY})", soft_wrap=True)


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
    from harnessrl.sft.fine_tune import run_sft
    from harnessrl.sft.data import SFTDataError

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
    from harnessrl.report.transfer import TransferError, matrix_markdown, write_transfer

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

    from harnessrl.experiment.arms import ExperimentError, load_spec, plan_runs, run_experiment, write_experiment_results
    from harnessrl.experiment.shared_baseline import BaselineError

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

        def _stop(signum: int, frame: FrameType | None) -> NoReturn:  # noqa: ARG001 - SIGTERM unwinds like Ctrl-C, so engines are shut down
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


def validate(
    args: list[str] = typer.Argument(None, metavar="FILES_AND_OVERRIDES",
                                     help="config files to check, and key=value overrides applied to each (none: "
                                          "the defaults)"),
    schema_only: bool = typer.Option(False, "--schema-only",
                                     help="only the RunConfig schema, not what train checks on this machine "
                                          "(harnesses and their installs, model, task paths, engine, sandbox)"),
) -> None:
    """Check run configs as `train` would before it creates anything; exits 1 when any is invalid."""
    import textwrap

    from harnessrl.config import ConfigError, load_config
    from harnessrl.run.preflight import run_problems

    console = Console()
    overrides = [a for a in args or [] if "=" in a]
    files: list[Path | None] = [Path(a) for a in args or [] if "=" not in a] or [None]
    bad = 0
    for path in files:
        name = str(path or "defaults") + (f" {' '.join(overrides)}" if overrides else "")
        try:
            cfg = load_config(path, overrides)
            problems = [] if schema_only else run_problems(cfg)
        except ConfigError as err:
            problems = [str(err)]
        if problems:
            bad += 1
            console.print(f"[red]FAIL[/red] {name}", soft_wrap=True)
            for problem in problems:
                console.print(textwrap.indent(problem, "  "), soft_wrap=True, highlight=False, markup=False)
        else:
            console.print(f"[green]ok[/green]   {name}", soft_wrap=True)
    raise typer.Exit(1 if bad else 0)


def show(
    config: Path = typer.Argument(None, help="YAML run config (omit for the defaults)"),
    overrides: list[str] = typer.Argument(None, help="dotted key=value overrides"),
) -> None:
    """Print the fully resolved config (defaults + file + overrides) as YAML."""
    import yaml

    from harnessrl.config import ConfigError, load_config

    try:
        cfg = load_config(config, overrides or [])
    except ConfigError as err:
        Console().print(f"[red]config error:[/red] {err}")
        raise typer.Exit(2) from None
    typer.echo(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
