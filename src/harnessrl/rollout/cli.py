"""`harnessrl rollout` and `harnessrl eval` (registered by harnessrl.cli). Heavy imports stay inside.

    harnessrl rollout --tasks builtin:train --harness builtin -n 4 --concurrency 4 --run-dir runs/r1
    harnessrl eval --tasks builtin:test --harness builtin -n 4 --engine vllm --json
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Iterator, List, Optional

import typer

TASKS_HELP = ("builtin:train|test|paraphrase|unseen|all|<category>|<family>[:<split>], a task directory, or a "
              "directory of task directories.")
MAX_TOKENS_HELP = ("Tokens per model reply at most (in-process proxy), whatever the harness asks; use the "
                   "training run's loop.max_tokens.")
TEMPERATURE_HELP = ("Sampling temperature of requests that send none (in-process proxy); use the training "
                    "run's serve.default_temperature.")
TOOL_FORMAT_HELP = ("hermes | smollm2 | bash: how the model writes tool calls (in-process proxy; default: the chat "
                    "template's own). Use the training run's render.tool_format.")


@contextlib.contextmanager
def _stdout_to_stderr(enabled: bool) -> Iterator[None]:
    """While enabled, everything written to fd 1 (engines, subprocesses) goes to stderr, so that
    `--json` leaves exactly one JSON object on stdout."""
    if not enabled:
        yield
        return
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _execute(tasks: str | list[Any], harness: list[str], n: int, concurrency: int, run_dir: Path, model: Optional[str],
             engine: str, sandbox: str, proxy: Optional[str], admin_token: Optional[str], max_turns: int,
             timeout: float, step: int, split: str, progress: bool = True,
             tool_format: Optional[str] = None, max_tokens: int = 512,
             temperature: float = 1.0) -> tuple[list[Any], list[Any]]:
    from harnessrl.engine.model import ModelNotFound
    from harnessrl.harness import HarnessConfigError
    from harnessrl.proxy.server import ProxyStartError
    from harnessrl.rollout.proxy_link import ProxyLinkError
    from harnessrl.rollout.jobs import RolloutsFailed, run_groups
    from harnessrl.rollout.session import proxy_session
    from harnessrl.sandbox.base import SandboxConfig, SandboxUnavailable
    from harnessrl.sandbox.health import preflight
    from harnessrl.tasks.loader import load_tasks
    from harnessrl.tasks.model import TaskError

    if engine not in ("hf", "vllm"):
        raise typer.BadParameter("--engine must be hf or vllm")
    if sandbox not in ("bwrap", "local"):
        raise typer.BadParameter("--sandbox must be bwrap or local")
    from harnessrl.render.tool_formats import TOOL_FORMATS

    if tool_format is not None and tool_format not in TOOL_FORMATS:
        raise typer.BadParameter(f"--tool-format must be one of {', '.join(TOOL_FORMATS)}")
    try:
        task_list = load_tasks(tasks) if isinstance(tasks, str) else tasks
        preflight(SandboxConfig(type=sandbox))  # a damaged host is named before the engine loads
        with proxy_session(run_dir, engine=engine, model=model, proxy_url=proxy, admin_token=admin_token,
                           tool_format=tool_format, max_tokens=max_tokens,
                           default_temperature=temperature) as (link, store):
            records = run_groups(task_list, harness or ["builtin"], n, proxy=link, store=store,
                                 sandbox_cfg=SandboxConfig(type=sandbox), concurrency=concurrency, step=step,
                                 max_turns=max_turns, harness_timeout_s=timeout, split=split,
                                 progress=progress)
    except (TaskError, HarnessConfigError, ValueError, ModelNotFound, ProxyStartError, ProxyLinkError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(code=2) from None
    except (RolloutsFailed, SandboxUnavailable) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(code=1) from None
    return task_list, records


def load_sets(specs: list[str], limit: Optional[int]) -> tuple[dict[str, list[Any]], list[Any]]:
    """({spec: its tasks}, every task once): with `limit`, the first `limit` tasks of each set taken
    one family at a time. Exits with code 2 and the loader's message on a bad spec."""
    from harnessrl.tasks.loader import interleave_families, load_tasks
    from harnessrl.tasks.model import TaskError

    sets: dict[str, list[Any]] = {}
    try:
        for spec in dict.fromkeys(specs):
            tasks = load_tasks(spec)
            sets[spec] = interleave_families(tasks)[:limit] if limit else tasks
    except TaskError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(code=2) from None
    union = list({t.id: t for ts in sets.values() for t in ts}.values())
    return sets, union


def rollout(
    tasks: str = typer.Option("builtin:train", "--tasks", "-t", help=TASKS_HELP),
    harness: List[str] = typer.Option(["builtin"], "--harness", "-H", help="Harness spec <name>[:<profile>] (e.g. claude-code:small); repeat to mix (one per group)."),
    n: int = typer.Option(4, "-n", "--samples", help="Rollouts per (task, harness) group."),
    concurrency: int = typer.Option(4, "--concurrency", "-c", help="Rollouts running at once."),
    run_dir: Path = typer.Option(Path("runs/rollout"), "--run-dir", "-d", help="Run directory (store)."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="smollm2-135m-instruct (default) or an HF dir."),
    engine: str = typer.Option("hf", "--engine", "-e", help="hf | vllm (in-process proxy only)."),
    sandbox: str = typer.Option("bwrap", "--sandbox", help="bwrap (isolated) | local (no isolation)."),
    proxy: Optional[str] = typer.Option(None, "--proxy", help="Attach to a running proxy: http://127.0.0.1:PORT."),
    admin_token: Optional[str] = typer.Option(None, "--admin-token", help="The running proxy's admin token."),
    max_turns: int = typer.Option(8, "--max-turns", help="Model calls per rollout (harnesses that support it)."),
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds per harness run."),
    step: int = typer.Option(0, "--step", help="Step number stored with the rollouts."),
    tool_format: Optional[str] = typer.Option(None, "--tool-format", help=TOOL_FORMAT_HELP),
    max_tokens: int = typer.Option(512, "--max-tokens", min=1, help=MAX_TOKENS_HELP),
    temperature: float = typer.Option(1.0, "--temperature", min=0.01, max=2.0, help=TEMPERATURE_HELP),
) -> None:
    """Run groups of rollouts (task x harness x n) in sandboxes through the proxy; store them."""
    from rich.console import Console

    _, records = _execute(tasks, harness, n, concurrency, run_dir, model, engine, sandbox, proxy, admin_token,
                          max_turns, timeout, step, split="rollout", tool_format=tool_format,
                          max_tokens=max_tokens, temperature=temperature)
    counts: dict[str, int] = {}
    for r in records:
        counts[r.status] = counts.get(r.status, 0) + 1
    Console().print(f"{len(records)} rollouts in {run_dir}: {counts}; list them with "
                    f"[bold]harnessrl calls {run_dir}[/bold]")


def evaluate(
    tasks: List[str] = typer.Option(["builtin:test"], "--tasks", "-t",
                                    help=TASKS_HELP + " Repeat to report several sets side by side (e.g. "
                                         "builtin:test, builtin:paraphrase, builtin:unseen)."),
    harness: List[str] = typer.Option(["builtin"], "--harness", "-H", help="Harness spec <name>[:<profile>] (e.g. codex:small); repeat to compare."),
    n: int = typer.Option(4, "-n", "--samples", help="Rollouts per (task, harness)."),
    k: List[int] = typer.Option([], "--k", help="Report pass@k for these k (default 1 and n)."),
    concurrency: int = typer.Option(4, "--concurrency", "-c", help="Rollouts running at once."),
    run_dir: Path = typer.Option(Path("runs/eval"), "--run-dir", "-d", help="Run directory (store)."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="smollm2-135m-instruct (default) or an HF dir."),
    engine: str = typer.Option("hf", "--engine", "-e", help="hf | vllm."),
    sandbox: str = typer.Option("bwrap", "--sandbox", help="bwrap | local."),
    proxy: Optional[str] = typer.Option(None, "--proxy", help="Attach to a running proxy: http://127.0.0.1:PORT."),
    admin_token: Optional[str] = typer.Option(None, "--admin-token", help="The running proxy's admin token."),
    max_turns: int = typer.Option(8, "--max-turns", help="Model calls per rollout."),
    timeout: float = typer.Option(600.0, "--timeout", help="Seconds per harness run."),
    limit: Optional[int] = typer.Option(None, "--limit", min=1,
                                        help="At most this many tasks per --tasks set, one family at a time."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object on stdout (all else to stderr)."),
    tool_format: Optional[str] = typer.Option(None, "--tool-format", help=TOOL_FORMAT_HELP),
    max_tokens: int = typer.Option(512, "--max-tokens", min=1, help=MAX_TOKENS_HELP),
    temperature: float = typer.Option(1.0, "--temperature", min=0.01, max=2.0, help=TEMPERATURE_HELP),
) -> None:
    """pass@1 (with a 95% bootstrap interval over tasks) and unbiased pass@k per task, category, family
    and harness; with several --tasks, one summary per set and a harness x set table."""
    from harnessrl.rollout.metrics import summarize, summarize_sets
    from harnessrl.rollout.report import print_sets, print_summary

    ks = sorted(set(k) | {1, n}) if not k else sorted(set(k) | {1})
    if any(x < 1 or x > n for x in ks):
        raise typer.BadParameter(f"every --k must be between 1 and -n ({n})")
    sets, union = load_sets(tasks, limit)
    with _stdout_to_stderr(json_out):
        task_list, records = _execute(union, harness, n, concurrency, run_dir, model, engine, sandbox, proxy,
                                      admin_token, max_turns, timeout, step=0, split="eval",
                                      tool_format=tool_format, max_tokens=max_tokens,
                                      temperature=temperature)
        if len(sets) == 1:
            summary = summarize(records, {t.id: t for t in task_list}, ks)
            print_summary(summary, stderr=json_out)
        else:
            summary = summarize_sets(records, sets, ks)
            print_sets(summary, stderr=json_out)
    if json_out:
        typer.echo(json.dumps(summary))


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the top-level app."""
    app.command("rollout")(rollout)
    app.command("eval")(evaluate)
