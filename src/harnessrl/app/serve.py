"""Commands of the proxy stage (registered by harnessrl.app.main). Keep top-level imports light.

    harnessrl serve --model M --port P --run-dir D [--engine hf|vllm|scripted] [--history exact|rerender]
    harnessrl serve --from-run runs/demo       # its last checkpoint, served as it trained (--model: other weights)
    harnessrl calls D [--json] [--rollout R] [--export out.parquet|out.jsonl]
"""

from __future__ import annotations

import json
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, List, Mapping, Optional

import typer

from harnessrl.app.flags import (CONFIG, DEFAULT_TEMPERATURE, DEFAULT_TOP_P, FROM_RUN, MAX_TOKENS, MAX_TOKENS_MODE,
                                 MODEL, SCRIPTED, TEMPERATURE_MODE, TOOL_FORMAT, TOP_P_MODE, config_option)
from harnessrl.engine.factory import IN_PROCESS_ENGINES

if TYPE_CHECKING:
    from harnessrl.config import RunConfig
    from harnessrl.engine.base import Engine
    from harnessrl.engine.factory import EngineSettings
    from harnessrl.launch import Transport
    from harnessrl.proxy.server import ProxyServer
    from harnessrl.proxy.serving import ServingPolicy
    from harnessrl.render.renderer import Renderer
    from harnessrl.store import RunStore

SERVE_ENGINES = IN_PROCESS_ENGINES  # serve runs its engine in this process (no *_server client)


def build_engine(kind: str, model_dir: Path, max_model_len: int | None, renderer: Any = None,
                 scripted_latency_s: float = 0.0, settings: EngineSettings | None = None) -> Engine:
    """An engine of `kind` over `model_dir`: with `settings` (a run's EngineSettings), built as that
    run built its engine; else the engine's own defaults. `scripted`: harnessrl.launch's scripted
    engine (one fixed sentence after `scripted_latency_s`; no model weights)."""
    from harnessrl.engine import make_engine
    from harnessrl.launch import scripted_engine

    if kind == SCRIPTED:
        return scripted_engine(model_dir, renderer, max_model_len, latency_s=scripted_latency_s,
                               model_path=str(model_dir))
    if settings is not None:  # in this process: a run's server URLs do not apply
        return make_engine(settings.for_model(str(model_dir), type=kind, max_model_len=max_model_len, base_urls=None))
    cfg: dict[str, Any] = {"type": kind, "model": str(model_dir)}
    if max_model_len:
        cfg["max_model_len"] = max_model_len
    return make_engine(cfg)


@dataclass(frozen=True)
class ServePlan:
    """How `serve` serves, decided from its flags before anything is loaded: the RunConfig (--config /
    --from-run / the defaults, the flags on top), the engine type, the serving policy, and the engine
    settings to build with (a named run's, else None: the engine's own defaults)."""

    cfg: RunConfig
    engine: str
    policy: ServingPolicy
    engine_settings: EngineSettings | None


def serve_plan(config: Optional[Path], from_run: Optional[Path], flags: Mapping[str, Any],
               max_tokens_cap: Optional[int]) -> ServePlan:
    """The ServePlan of serve's flags (`flags`: FLAG_KEYS name -> value, None when not given). A bad
    value, or a config whose engine serve cannot run in this process, exits 2 with the fix."""
    from harnessrl.app.serve_config import config_of_flags

    cfg = config_of_flags(config, from_run, flags, SERVE_ENGINES)
    engine = flags.get("engine") or cfg.engine.type
    if engine not in SERVE_ENGINES:
        typer.echo(f"error: the config's engine.type is {engine}, a client of running servers; serve runs its "
                   f"engine in this process: pass --engine {' | '.join(SERVE_ENGINES)}", err=True)
        raise typer.Exit(code=2)
    named = config is not None or from_run is not None
    return ServePlan(cfg, engine, serving_policy(cfg, max_tokens_cap), cfg.engine if named else None)


def serve(
    model: Optional[str] = MODEL,
    port: int = typer.Option(8000, "--port", "-p", help="TCP port on --host (0 = any free port)."),
    run_dir: Path = typer.Option(Path("runs/serve"), "--run-dir", "-d", help="Run directory for the call store."),
    engine: Optional[str] = config_option("engine", "-e", help=f"Inference backend in this process: "
                                          f"{' | '.join(SERVE_ENGINES)} (auto: vllm when importable, else hf; "
                                          f"scripted: one fixed reply, no weights).",
                                          allowed=SERVE_ENGINES),
    config: Optional[Path] = CONFIG,
    from_run: Optional[Path] = FROM_RUN,
    history: str = typer.Option("exact", "--history", help="exact (reuse sampled ids) | rerender (plain template)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Listen address (keep it on loopback)."),
    uds: Optional[Path] = typer.Option(None, "--uds", help="Also listen on this Unix socket path."),
    max_model_len: Optional[int] = config_option("max_model_len", help="Context limit (null: the model's own "
                                                                       "window, 8192 for SmolLM2)."),
    max_tokens: Optional[int] = MAX_TOKENS,
    max_tokens_cap: Optional[int] = typer.Option(None, "--max-tokens-cap", show_default="--max-tokens",
                                                 help="Completion limit whatever a request asks; as in a training "
                                                      "run, --max-tokens caps too unless this is given."),
    default_temperature: Optional[float] = DEFAULT_TEMPERATURE,
    default_top_p: Optional[float] = DEFAULT_TOP_P,
    temperature_mode: Optional[str] = TEMPERATURE_MODE,
    top_p_mode: Optional[str] = TOP_P_MODE,
    max_tokens_mode: Optional[str] = MAX_TOKENS_MODE,
    tool_format: Optional[str] = TOOL_FORMAT,
    max_body_mb: float = typer.Option(8.0, "--max-body-mb", help="Request body limit on every route (413 above)."),
    rollout_quota_mb: float = typer.Option(256.0, "--rollout-quota-mb",
                                           help="Store quota per rollout key: request + response bytes (413 when spent)."),
    drain_s: float = typer.Option(30.0, "--drain-s", help="On SIGTERM / Ctrl-C: how long in-flight calls may finish."),
    store_sync: str = typer.Option("normal", "--store-sync",
                                   help="SQLite synchronous: normal (survives process crashes) | full (+ power loss)."),
    keep_alive_s: float = typer.Option(75.0, "--keep-alive-s",
                                       help="Close a keep-alive connection idle this long (seconds)."),
    header_timeout_s: float = typer.Option(15.0, "--header-timeout-s",
                                           help="A connection's request headers must arrive within this (408)."),
    scripted_latency_s: float = typer.Option(0.0, "--scripted-latency-s",
                                             help="scripted engine only: seconds per call (stands in for a model)."),
) -> None:
    """Serve a policy over the OpenAI Chat Completions, OpenAI Responses, Anthropic Messages and Gemini
    APIs, recording every call; with --config / --from-run, as that training run serves (the flags not
    given are its); --from-run serves the run's last checkpoint unless --model names other weights."""
    from rich.console import Console

    console = Console()
    if store_sync not in ("normal", "full"):
        raise typer.BadParameter("--store-sync must be normal or full")
    if history not in ("exact", "rerender"):
        raise typer.BadParameter("--history must be exact or rerender")
    flags = {"model": model, "engine": engine, "max_model_len": max_model_len, "max_tokens": max_tokens,
             "default_temperature": default_temperature, "default_top_p": default_top_p,
             "temperature_mode": temperature_mode, "top_p_mode": top_p_mode, "max_tokens_mode": max_tokens_mode,
             "tool_format": tool_format}
    plan = serve_plan(config, from_run, flags, max_tokens_cap)
    from harnessrl.engine.model import ModelNotFound
    from harnessrl.launch import Transport
    from harnessrl.proxy.server import ProxyStartError
    from harnessrl.store import RunStore

    transport = Transport(host=host, port=port, uds=str(uds) if uds else None, history_mode=history,
                          max_body_bytes=int(max_body_mb * 1024 * 1024),
                          rollout_quota=int(rollout_quota_mb * 1024 * 1024), drain_s=drain_s,
                          keep_alive_s=keep_alive_s, header_timeout_s=header_timeout_s)
    try:
        with console.status(f"loading {plan.cfg.model.path or 'the default model'} ({plan.engine} engine)"):
            model_dir, renderer, eng = serve_engine(plan, scripted_latency_s)
    except ModelNotFound as err:
        console.print(f"[red]error:[/red] {err}")
        raise typer.Exit(code=2) from None
    store = RunStore(run_dir, synchronous=store_sync)
    try:
        server = open_served(plan, model_dir, renderer, eng, store, transport)
    except ProxyStartError as err:
        console.print(f"[red]error:[/red] {err} (pick another --port)")
        raise typer.Exit(code=2) from None
    given = plan.cfg.model.path  # a checkpoint dir as named (--from-run: RUN/checkpoints/step_N/policy)
    _print_urls(console, server, run_dir, Path(given) if given and Path(given).is_dir() else Path(model_dir))
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        while True:
            time.sleep(1.0)
    except KeyboardInterrupt:
        console.print(f"stopping: draining in-flight calls (up to {drain_s:g} s)")
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the drain
        server.stop()
        eng.close()
        store.close()
        console.print("stopped")


def serve_engine(plan: ServePlan, scripted_latency_s: float = 0.0) -> tuple[Path, Any, Any]:
    """(model dir, renderer, engine) `serve` serves `plan` with: the run's renderer (render.tool_format
    and its `command:` harnesses' shell tools, harnessrl.launch `run_renderer`, as the run trained)
    and its engine. ModelNotFound when the model cannot be had."""
    from harnessrl.launch import run_renderer, served_model_dir

    model_dir = served_model_dir(plan.cfg.model.path, plan.engine == SCRIPTED)
    renderer = run_renderer(plan.cfg, model_dir)
    eng = build_engine(plan.engine, model_dir, plan.cfg.engine.max_model_len, renderer, scripted_latency_s,
                       plan.engine_settings)
    return model_dir, renderer, eng


def open_served(plan: ServePlan, model_dir: Path, renderer: Renderer, engine: Engine, store: RunStore,
                transport: Transport) -> ProxyServer:
    """The started proxy of `serve` (harnessrl.launch `open_proxy`: the plan's serving policy, the
    model named by its directory). ProxyStartError when it cannot listen."""
    from harnessrl.launch import open_proxy

    return open_proxy(plan.policy, renderer, engine, store, transport, served_model=Path(model_dir).name)


def serving_policy(cfg: RunConfig, max_tokens_cap: Optional[int]) -> ServingPolicy:
    """The ServingPolicy `cfg` serves with (`serve.policy()`: serve.max_tokens is also the cap, so a
    harness asking for 32k gets at most that), with `max_tokens_cap` as the cap when given. A cap out
    of its bound is a usage error (exit 2) that names the flag."""
    from pydantic import ValidationError

    try:
        return cfg.serve.policy(max_tokens_cap)
    except ValidationError as err:
        bad = "; ".join(f"--max-tokens-cap {e['input']}: {e['msg'].lower()}" for e in err.errors())
        raise typer.BadParameter(bad) from None


def _raise_interrupt(signum: int, frame: Any) -> None:
    """SIGTERM stops `serve` the way Ctrl-C does: graceful drain, then exit 0."""
    raise KeyboardInterrupt


PROTOCOLS = (("OpenAI Chat Completions", "openai"), ("OpenAI Responses", "responses"),
             ("Anthropic Messages", "anthropic"), ("Gemini", "gemini"))  # (name, key of base_urls())


def _print_urls(console: Any, server: Any, run_dir: Path, weights: Path) -> None:
    from rich.table import Table

    urls = server.base_urls()
    console.print(f"[bold]harnessrl proxy[/bold] serving {weights}", soft_wrap=True)
    table = Table(title="protocols (any model name is accepted)")
    table.add_column("protocol")
    table.add_column("base URL")
    for name, key in PROTOCOLS:
        table.add_row(name, urls[key])
    console.print(table)
    console.print(f"calls are recorded in {run_dir}; list them with [bold]harnessrl calls {run_dir}[/bold]")
    console.print(f"admin token (POST /admin/rollouts): {server.admin_token}")
    console.print("Ctrl-C or SIGTERM to stop (in-flight calls finish first)")


def calls(
    run_dir: Path = typer.Argument(..., help="Run directory (holds harnessrl.sqlite)."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON array instead of a table."),
    rollout: Optional[List[str]] = typer.Option(None, "--rollout", "-r", help="Only these rollout ids."),
    export: Optional[Path] = typer.Option(None, "--export", help="Write the calls to a .parquet or .jsonl file."),
) -> None:
    """List the model calls captured in a run directory (or export them)."""
    from rich.console import Console

    from harnessrl.store import RunStore
    from harnessrl.store.export import ExportError
    from harnessrl.store.schema import DB_NAME

    console = Console(stderr=True)
    if not (run_dir / DB_NAME).exists():
        console.print(f"[red]error:[/red] no run store at {run_dir / DB_NAME}; pass the --run-dir of a serve/train run")
        raise typer.Exit(code=2)
    store = RunStore(run_dir)
    try:
        if export is not None:
            try:
                n = store.export_calls(export, rollout_ids=rollout or None)
            except ExportError as err:
                console.print(f"[red]error:[/red] {err}")
                raise typer.Exit(code=2) from None
            console.print(f"exported {n} calls to {export}")
            return
        if as_json:
            from dataclasses import asdict

            records = store.list_calls(rollout or None, include_raw=True)
            typer.echo(json.dumps([asdict(c) for c in records], ensure_ascii=False, default=str))
            return
        summaries = store.list_call_summaries(rollout or None)
    finally:
        store.close()
    _print_calls_table(summaries)


def _print_calls_table(summaries: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"{len(summaries)} calls")
    for col in ("rollout", "seq", "protocol", "status", "prompt", "sampled", "reused", "version", "T", "finish", "ms"):
        table.add_column(col, justify="right" if col in ("seq", "prompt", "sampled", "reused", "ms") else "left")
    for c in summaries:
        status = c["status"] if c["status"] == "ok" else f"[red]{c['status']}[/red]: {c['error'][:40]}"
        table.add_row(c["rollout_id"], str(c["seq"]), c["protocol"], status, str(c["n_prompt"]), str(c["n_sampled"]),
                      str(c["meta"].get("n_reused", "")), str(c["policy_version"]), f"{c['temperature']:g}",
                      c["finish_reason"], f"{(c['t_end'] - c['t_start']) * 1000:.0f}")
    Console().print(table)


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the top-level app."""
    app.command("serve")(serve)
    app.command("calls")(calls)
