"""`harnessrl demos`: reference demonstrations through the harness, the data of a cold start.

    harnessrl demos --config configs/multistep.yaml -t builtin:lookup:train --limit 16 -d runs/demos
    harnessrl sft runs/demos --out runs/demos-sft
    harnessrl train --config configs/multistep.yaml model.path=runs/demos-sft/policy

Each task's reference solution, served by the scripted engine as the model's replies
(sft/reference.py), drives the unmodified harnesses of the config (or --harness) in their
sandboxes; the proxy records the calls as it records a model's, and the verifier scores each
rollout. No weights are loaded: only the model's tokenizer.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import List, Optional

import typer

from harnessrl.app.flags import CONFIG, FROM_RUN, TOOL_FORMAT, config_option

TASKS = typer.Option(..., "--tasks", "-t", help="Tasks with a reference solution (builtin:<selector>, a task "
                                                "directory); repeat for several sets.")
HARNESS = typer.Option(None, "--harness", "-H", show_default="the config's harnesses",
                       help="Harness spec; repeat for several. A harness of the config keeps its options.")


def demos(
    tasks: List[str] = TASKS,
    harness: Optional[List[str]] = HARNESS,
    n: int = typer.Option(1, "-n", "--samples", min=1, help="Rollouts per (task, harness): the policy is "
                                                           "deterministic, so 1 unless the harness varies."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1, help="At most this many tasks per --tasks set, "
                                                                     "one family at a time."),
    run_dir: Path = typer.Option(Path("runs/demos"), "--run-dir", "-d", help="Run directory (store): what "
                                                                             "`harnessrl sft` reads."),
    config: Optional[Path] = CONFIG, from_run: Optional[Path] = FROM_RUN,
    sandbox: Optional[str] = config_option("sandbox", help="bwrap (isolated) | local (no isolation)."),
    concurrency: Optional[int] = config_option("concurrency", "-j", help="Rollouts running at once."),
    max_turns: Optional[int] = config_option("max_turns", help="Model calls per rollout (a task's own "
                                                               "metadata.max_turns wins)."),
    timeout: Optional[float] = config_option("timeout", help="Seconds per harness run."),
    tool_format: Optional[str] = TOOL_FORMAT,
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object on stdout."),
) -> None:
    """Run each task's reference solution through the harness as the model's replies; store the
    rollouts for `harnessrl sft` (a cold start from reference demonstrations)."""
    from harnessrl.app.rollout import load_sets
    from harnessrl.app.serve_config import config_of_flags, harness_specs
    from harnessrl.errors import HarnessRLError
    from harnessrl.harness import check_harnesses
    from harnessrl.sft.demos import collect_demos
    from harnessrl.sandbox.health import preflight
    from harnessrl.sandbox.base import SandboxConfig

    flags = {"sandbox": sandbox, "concurrency": concurrency, "max_turns": max_turns, "timeout": timeout,
             "tool_format": tool_format}
    cfg = config_of_flags(config, from_run, flags, ("scripted",))
    _, union = load_sets(tasks, limit)
    specs, options = harness_specs(cfg, harness)
    try:
        preflight(SandboxConfig(type=cfg.sandbox.type, host_uid=cfg.sandbox.host_uid))
        check_harnesses(specs, options)
        result = collect_demos(cfg, union, specs, run_dir, n=n, harness_options=options, progress=not json_out)
    except HarnessRLError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(code=2) from None
    if json_out:
        typer.echo(json.dumps(asdict(result)))
        return
    typer.echo(f"{result.passed}/{result.rollouts} reference rollouts passed in {result.run_dir} "
               f"(statuses {result.statuses}, passed per harness {result.passed_by_harness})")
    for failed in result.failed_tasks[:10]:
        typer.echo(f"  not passed: {failed}")
    typer.echo(f"train on them: harnessrl sft {result.run_dir} --out {result.run_dir}-sft")


def register(app: typer.Typer) -> None:
    """Add this stage's command to the top-level app."""
    app.command("demos")(demos)
