"""`harnessrl rollout` and `harnessrl eval` (registered by harnessrl.app.main). Heavy imports stay inside.

    harnessrl rollout --tasks builtin:train --harness builtin -n 4 --concurrency 4 --run-dir runs/r1
    harnessrl eval --tasks builtin:test --harness builtin -n 4 --engine vllm --json
    harnessrl eval --from-run runs/demo --tasks builtin:test      # its last checkpoint, served as it trained

Serving options that are not given come from the run config (`--config` / `--from-run`, else the
RunConfig defaults), so an eval serves exactly as its training run did.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, List, Mapping, Optional

import typer

from harnessrl.app.flags import (CONFIG, DEFAULT_TEMPERATURE, DEFAULT_TOP_P, FROM_RUN, MAX_TOKENS, MAX_TOKENS_MODE,
                                 MODEL, TEMPERATURE_MODE, TOOL_FORMAT, TOP_P_MODE, config_option)
from harnessrl.engine.factory import ENGINE_TYPES

if TYPE_CHECKING:
    from harnessrl.config.schema import RunConfig

TASKS_HELP = ("builtin:train|test|paraphrase|unseen|all|<category>|<family>[:<split>], a task directory, or a "
              "directory of task directories.")
ENGINES = ENGINE_TYPES  # every engine type: in-process backends, clients of running servers, scripted

# Options that `rollout` and `eval` share (with `serve`: app/flags.py CONFIG, MODEL, TOOL_FORMAT, the
# sampling flags). A serving option left unset (None) takes its value from the run config (--config
# FILE, or --from-run DIR's stored config, else the RunConfig defaults); app/flags.py FLAG_KEYS names
# the key each one sets, and its field gives the default and bound.
HARNESS = typer.Option(None, "--harness", "-H", show_default="the config's harnesses",
                       help="Harness spec <name>[:<profile>] (e.g. claude-code:small); repeat to mix or compare "
                            "(one group per harness). A harness of the config keeps its options.")
CONCURRENCY = config_option("concurrency", "-j", help="Rollouts running at once.")
ENGINE = config_option("engine", "-e", help=f"{' | '.join(ENGINES)} (in-process proxy; scripted: one fixed reply, "
                                            "no weights).")
SANDBOX = config_option("sandbox", help="bwrap (isolated) | local (no isolation).")
PROXY = typer.Option(None, "--proxy", help="Attach to a running proxy: http://127.0.0.1:PORT (it keeps its own "
                                           "engine, tool format and sampling).")
ADMIN_TOKEN = typer.Option(None, "--admin-token", help="The running proxy's admin token.")
MAX_TURNS = config_option("max_turns", help="Model calls per rollout (harnesses that support it).")
TIMEOUT = config_option("timeout", help="Seconds per harness run.")
LIMIT = typer.Option(None, "--limit", min=1, help="At most this many tasks per --tasks set, one family at a time "
                                                 "(eval: the training run's loop.eval_size).")
RUN_DIR_DEFAULT = "runs/{split}; with --proxy, the proxy's own"


@dataclass(frozen=True)
class ServeFlags:
    """The flags `rollout` and `eval` share, as given (None: not given)."""

    config: Optional[Path]
    from_run: Optional[Path]
    harness: Optional[List[str]]
    concurrency: Optional[int]
    model: Optional[str]
    engine: Optional[str]
    sandbox: Optional[str]
    proxy: Optional[str]
    admin_token: Optional[str]
    max_turns: Optional[int]
    timeout: Optional[float]
    tool_format: Optional[str]
    max_tokens: Optional[int]
    default_temperature: Optional[float]
    default_top_p: Optional[float] = None
    temperature_mode: Optional[str] = None
    top_p_mode: Optional[str] = None
    max_tokens_mode: Optional[str] = None

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> "ServeFlags":
        """The flags from a command's parameters by name (`ServeFlags.of(locals())`)."""
        return cls(**{f.name: values[f.name] for f in fields(cls)})


# flags that set how the in-process proxy serves: a running --proxy serves its own way
PROXY_OWN = ("model", "engine", "tool_format", "max_tokens", "default_temperature", "default_top_p",
             "temperature_mode", "top_p_mode", "max_tokens_mode")


def _refuse_with_proxy(flags: ServeFlags) -> None:
    """--proxy with a serving flag it cannot honour: exit 2 naming them (never ignored)."""
    given = [f"--{name.replace('_', '-')}" for name in PROXY_OWN if getattr(flags, name) is not None]
    if flags.proxy and given:
        typer.echo(f"error: {', '.join(given)} cannot apply with --proxy: the running proxy serves with its own "
                   "engine, tool format and sampling. Drop them, or restart `harnessrl serve` with them "
                   "(serve has the same options)", err=True)
        raise typer.Exit(code=2)


def _serving_config(flags: ServeFlags) -> Any:
    """The RunConfig these flags serve with; a bad value or a missing file/run exits 2 with the fix,
    before anything is loaded or a run store is opened."""
    from harnessrl.app.serve_config import config_of_flags

    _refuse_with_proxy(flags)
    return config_of_flags(flags.config, flags.from_run, vars(flags), ENGINES)


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


def _execute(tasks: str | list[Any], cfg: RunConfig, flags: ServeFlags, n: int, run_dir: Path | None, step: int,
             split: str, progress: bool = True) -> tuple[list[Any], list[Any], Path]:
    """Run every task x harness x n through the proxy `cfg` serves with (or the running --proxy);
    returns (tasks, records, the run directory they were stored in). `run_dir` None: runs/<split>,
    or with --proxy the proxy's own (rollout/session.py)."""
    import functools

    from harnessrl.engine.model import ModelNotFound
    from harnessrl.harness import HarnessConfigError, check_harnesses
    from harnessrl.proxy.server import ProxyStartError
    from harnessrl.rollout.proxy_link import ProxyLinkError
    from harnessrl.rollout.jobs import RolloutsFailed, run_groups
    from harnessrl.app.proxy_session import proxy_session
    from harnessrl.app.serve_config import SCRIPTED, harness_specs
    from harnessrl.launch import local_proxy
    from harnessrl.sandbox.base import SandboxConfig, SandboxUnavailable
    from harnessrl.sandbox.health import preflight
    from harnessrl.tasks.loader import load_tasks
    from harnessrl.tasks.model import TaskError

    sandbox_cfg = SandboxConfig(type=cfg.sandbox.type, host_uid=cfg.sandbox.host_uid)
    specs, harness_options = harness_specs(cfg, flags.harness, evaluated=split == "eval")
    try:
        local = functools.partial(local_proxy, cfg, scripted=flags.engine == SCRIPTED,
                                  served={s: harness_options.get(s, {}) for s in specs})
        task_list = load_tasks(tasks) if isinstance(tasks, str) else tasks
        preflight(sandbox_cfg)  # a damaged host is named before the engine loads
        check_harnesses(specs, harness_options)  # so is a missing harness binary or path
        if run_dir is None and not flags.proxy:
            run_dir = Path(f"runs/{split}")
        with proxy_session(run_dir, local=local, proxy_url=flags.proxy, admin_token=flags.admin_token) as (link, store):
            run_dir = Path(store.run_dir)
            records = run_groups(task_list, specs, n, proxy=link, store=store, sandbox_cfg=sandbox_cfg,
                                 concurrency=cfg.loop.concurrency, step=step, max_turns=cfg.loop.max_turns,
                                 harness_timeout_s=cfg.loop.rollout_timeout_s, harness_options=harness_options,
                                 split=split, progress=progress,
                                 progress_every_s=cfg.output.progress_every_s)
    except (TaskError, HarnessConfigError, ValueError, ModelNotFound, ProxyStartError, ProxyLinkError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(code=2) from None
    except (RolloutsFailed, SandboxUnavailable) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(code=1) from None
    return task_list, records, run_dir


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


def run_eval_sets(cfg: RunConfig, from_run: Optional[Path], limit: Optional[int]) -> tuple[dict[str, list[Any]], list[Any]]:
    """The held-out sets a training run evaluates (tasks.eval_sets with tasks.families, the first
    `limit` or loop.eval_size of each, families interleaved); with `from_run`, exactly the task ids
    that run pinned at its first start, so a checkpoint's eval compares with the run's own before."""
    from harnessrl.errors import HarnessRLError
    from harnessrl.run.task_sets import default_tasks
    from harnessrl.store import RunStore

    try:
        _, evals = default_tasks(cfg)
    except HarnessRLError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(code=2) from None
    pinned: dict[str, list[str]] = {}
    if from_run is not None:
        with RunStore(from_run) as store:
            for i, name in enumerate(evals):
                ids = store.get_meta("eval_task_ids" if i == 0 else f"eval_task_ids:{name}")
                if ids:
                    pinned[name] = list(ids)
    sets: dict[str, list[Any]] = {}
    for name, ts in evals.items():
        if name in pinned:
            by_id = {t.id: t for t in ts}
            ts = [by_id[i] for i in pinned[name] if i in by_id]
        sets[name] = ts[:limit or cfg.tasks.eval_set_size(name, cfg.loop.eval_size)]
    union = list({t.id: t for ts in sets.values() for t in ts}.values())
    return sets, union


def rollout(
    tasks: str = typer.Option("builtin:train", "--tasks", "-t", help=TASKS_HELP),
    n: Optional[int] = typer.Option(None, "-n", "--samples", min=1, show_default="loop.n_per_group",
                                    help="Rollouts per (task, harness) group."),
    run_dir: Optional[Path] = typer.Option(None, "--run-dir", "-d", show_default=RUN_DIR_DEFAULT.format(split="rollout"),
                                           help="Run directory (store)."),
    step: int = typer.Option(0, "--step", help="Step number stored with the rollouts."),
    limit: Optional[int] = LIMIT,
    config: Optional[Path] = CONFIG, from_run: Optional[Path] = FROM_RUN, harness: Optional[List[str]] = HARNESS,
    concurrency: Optional[int] = CONCURRENCY, model: Optional[str] = MODEL, engine: Optional[str] = ENGINE,
    sandbox: Optional[str] = SANDBOX, proxy: Optional[str] = PROXY, admin_token: Optional[str] = ADMIN_TOKEN,
    max_turns: Optional[int] = MAX_TURNS, timeout: Optional[float] = TIMEOUT, tool_format: Optional[str] = TOOL_FORMAT,
    max_tokens: Optional[int] = MAX_TOKENS, default_temperature: Optional[float] = DEFAULT_TEMPERATURE,
    default_top_p: Optional[float] = DEFAULT_TOP_P, temperature_mode: Optional[str] = TEMPERATURE_MODE,
    top_p_mode: Optional[str] = TOP_P_MODE, max_tokens_mode: Optional[str] = MAX_TOKENS_MODE,
) -> None:
    """Run groups of rollouts (task x harness x n) in sandboxes through the proxy; store them. Ends with
    the pass rate (pass@1, 95% interval) and mean reward per harness, as `eval` reports them."""
    from harnessrl.app.eval_tables import print_rollouts
    from harnessrl.rollout.pass_at_k import summarize

    flags = ServeFlags.of(locals())
    cfg = _serving_config(flags)
    n = n if n is not None else cfg.loop.n_per_group
    chosen: str | list[Any] = load_sets([tasks], limit)[1] if limit else tasks
    task_list, records, run_dir = _execute(chosen, cfg, flags, n, run_dir, step, split="rollout")
    print_rollouts(summarize(records, {t.id: t for t in task_list}, (1,)), run_dir)


def evaluate(
    tasks: Optional[List[str]] = typer.Option(None, "--tasks", "-t", show_default="builtin:test; with --config/"
                                              "--from-run: the run's own held-out sets",
                                              help=TASKS_HELP + " Repeat to report several sets side by side "
                                                   "(e.g. builtin:test, builtin:paraphrase, builtin:unseen)."),
    n: Optional[int] = typer.Option(None, "-n", "--samples", min=1, show_default="loop.eval_samples",
                                    help="Rollouts per (task, harness) group."),
    pass_at: List[int] = typer.Option([], "--pass-at-k", help="Report pass@k for this k (repeat for several; "
                                      "default 1 and --samples)."),
    k_alias: List[int] = typer.Option([], "--k", hidden=True, help="Deprecated: --pass-at-k."),
    run_dir: Optional[Path] = typer.Option(None, "--run-dir", "-d", show_default=RUN_DIR_DEFAULT.format(split="eval"),
                                           help="Run directory (store)."),
    limit: Optional[int] = LIMIT,
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object on stdout (all else to stderr)."),
    config: Optional[Path] = CONFIG, from_run: Optional[Path] = FROM_RUN, harness: Optional[List[str]] = HARNESS,
    concurrency: Optional[int] = CONCURRENCY, model: Optional[str] = MODEL, engine: Optional[str] = ENGINE,
    sandbox: Optional[str] = SANDBOX, proxy: Optional[str] = PROXY, admin_token: Optional[str] = ADMIN_TOKEN,
    max_turns: Optional[int] = MAX_TURNS, timeout: Optional[float] = TIMEOUT, tool_format: Optional[str] = TOOL_FORMAT,
    max_tokens: Optional[int] = MAX_TOKENS, default_temperature: Optional[float] = DEFAULT_TEMPERATURE,
    default_top_p: Optional[float] = DEFAULT_TOP_P, temperature_mode: Optional[str] = TEMPERATURE_MODE,
    top_p_mode: Optional[str] = TOP_P_MODE, max_tokens_mode: Optional[str] = MAX_TOKENS_MODE,
) -> None:
    """pass@1 (with a 95% bootstrap interval over tasks) and unbiased pass@k per task, category, family
    and harness; with several --tasks, one summary per set and a harness x set table."""
    from harnessrl.rollout.pass_at_k import summarize, summarize_sets
    from harnessrl.app.eval_tables import print_sets, print_summary

    flags = ServeFlags.of(locals())
    cfg = _serving_config(flags)
    n = n if n is not None else cfg.loop.eval_samples
    k = [*pass_at, *k_alias]
    ks = sorted(set(k) | {1, n}) if not k else sorted(set(k) | {1})
    if any(x < 1 or x > n for x in ks):
        raise typer.BadParameter(f"every --pass-at-k must be between 1 and --samples ({n})")
    if tasks is None and (config is not None or from_run is not None):
        sets, union = run_eval_sets(cfg, from_run, limit)
    else:
        sets, union = load_sets(tasks or ["builtin:test"], limit)
    with _stdout_to_stderr(json_out):
        task_list, records, _ = _execute(union, cfg, flags, n, run_dir, step=0, split="eval")
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
