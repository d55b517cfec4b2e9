"""Commands of the proxy stage (registered by harnessrl.app.main). Keep top-level imports light.

    harnessrl serve --model M --port P --run-dir D [--engine hf|vllm|scripted] [--history exact|rerender]
    harnessrl calls D [--json] [--rollout R] [--export out.parquet|out.jsonl]
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any, List, Optional

import typer

from harnessrl.app.flags import config_option
from harnessrl.app.rollout import TOOL_FORMAT_HELP

ENGINES = ("auto", "hf", "vllm", "scripted")
SMOLLM2_WINDOW = 8192  # the default model's context (its tokenizer-only cache has no config.json)


def build_engine(kind: str, model_dir: Path, max_model_len: int | None, renderer: Any = None,
                 scripted_latency_s: float = 0.0) -> Any:
    """An engine of `kind` over `model_dir`. `scripted` answers every call with one fixed sentence
    after `scripted_latency_s` (a smoke-test / load-test policy: no model weights are loaded)."""
    from harnessrl.engine import make_engine
    from harnessrl.engine.scripted import ScriptedEngine

    if kind == "scripted":
        from harnessrl.engine.model import model_context_window

        reply = list(renderer.encode("Hello from the scripted engine.")) + [renderer.eot_id]
        window = max_model_len or model_context_window(model_dir) or SMOLLM2_WINDOW
        return ScriptedEngine(lambda prompt_ids: reply, model_path=str(model_dir), max_model_len=window,
                              eos_ids=[renderer.eot_id], latency_s=scripted_latency_s, record_calls=0)
    cfg: dict[str, Any] = {"type": kind, "model": str(model_dir)}
    if max_model_len:
        cfg["max_model_len"] = max_model_len
    return make_engine(cfg)


def serve(
    model: Optional[str] = typer.Option(None, "--model", "-m", help="smollm2-135m-instruct (default) or an HF dir/id."),
    port: int = typer.Option(8000, "--port", "-p", help="TCP port on --host (0 = any free port)."),
    run_dir: Path = typer.Option(Path("runs/serve"), "--run-dir", "-d", help="Run directory for the call store."),
    engine: Optional[str] = typer.Option(None, "--engine", "-e", show_default="engine.type",
                                         help="Inference backend: auto (vllm when importable, else hf) | hf | "
                                              "vllm | scripted (one fixed reply, no weights)."),
    history: str = typer.Option("exact", "--history", help="exact (reuse sampled ids) | rerender (plain template)."),
    host: str = typer.Option("127.0.0.1", "--host", help="Listen address (keep it on loopback)."),
    uds: Optional[Path] = typer.Option(None, "--uds", help="Also listen on this Unix socket path."),
    max_model_len: Optional[int] = typer.Option(None, "--max-model-len", help="Context limit (default: the model's own window, 8192 for SmolLM2)."),
    max_tokens: Optional[int] = config_option("max_tokens", help="Completion limit when a request sets none."),
    max_tokens_cap: Optional[int] = typer.Option(None, "--max-tokens-cap", show_default="--max-tokens",
                                                 help="Completion limit whatever a request asks; as in a training "
                                                      "run, --max-tokens caps too unless this is given."),
    default_temperature: Optional[float] = config_option("default_temperature",
                                                         help="Temperature of requests that send none."),
    default_top_p: Optional[float] = config_option("default_top_p", help="top_p of requests that send none."),
    temperature_mode: str = typer.Option("default", "--temperature-mode", show_default="serve.temperature_mode",
                                         help="default: a temperature the harness sends is used | force: "
                                              "--default-temperature replaces it (both are recorded)."),
    top_p_mode: str = typer.Option("default", "--top-p-mode", show_default="serve.top_p_mode",
                                   help="default | force: --default-top-p replaces the harness's top_p."),
    max_tokens_mode: str = typer.Option("default", "--max-tokens-mode", show_default="serve.max_tokens_mode",
                                        help="default | force: --max-tokens replaces the harness's max_tokens."),
    tool_format: Optional[str] = typer.Option(None, "--tool-format", show_default="render.tool_format",
                                              help=TOOL_FORMAT_HELP),
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
    """Serve a policy over the OpenAI Chat, Anthropic Messages and OpenAI Responses APIs, recording every call."""
    from rich.console import Console

    console = Console()
    engine, max_tokens, default_temperature = _run_defaults(engine, max_tokens, default_temperature)
    if engine not in ENGINES:
        raise typer.BadParameter(f"--engine must be one of {', '.join(ENGINES)}")
    if store_sync not in ("normal", "full"):
        raise typer.BadParameter("--store-sync must be normal or full")
    if history not in ("exact", "rerender"):
        raise typer.BadParameter("--history must be exact or rerender")
    from harnessrl.render.tool_formats import TOOL_FORMATS

    if tool_format is not None and tool_format not in TOOL_FORMATS:
        raise typer.BadParameter(f"--tool-format must be one of {', '.join(TOOL_FORMATS)}")
    modes = {"temperature": temperature_mode, "top_p": top_p_mode, "max_tokens": max_tokens_mode}
    bad = [f"--{k.replace('_', '-')}-mode {v}" for k, v in modes.items() if v not in ("default", "force")]
    if bad:
        raise typer.BadParameter(f"{', '.join(bad)}: a mode is default or force")
    policy = serving_policy(max_tokens, max_tokens_cap, default_temperature, default_top_p,
                            tuple(k for k, v in modes.items() if v == "force"))
    from harnessrl.engine.model import ModelNotFound, resolve_model, smollm2_tokenizer_dir
    from harnessrl.proxy.server import ProxyServer, ProxyStartError
    from harnessrl.store import RunStore

    from harnessrl.render.renderer import Renderer

    try:
        with console.status(f"loading {model or 'the default model'} ({engine} engine)"):
            # the scripted engine needs only the default tokenizer, not the weights
            model_dir = smollm2_tokenizer_dir() if engine == "scripted" and model is None else resolve_model(model)
            renderer = Renderer.from_pretrained(model_dir, tool_format=tool_format)
            eng = build_engine(engine, model_dir, max_model_len, renderer, scripted_latency_s)
    except ModelNotFound as err:
        console.print(f"[red]error:[/red] {err}")
        raise typer.Exit(code=2) from None
    store = RunStore(run_dir, synchronous=store_sync)
    store.set_meta("render", {"tool_format": renderer.info.tool_format, "history": history})
    store.set_meta("serve", policy.model_dump(mode="json"))
    server = ProxyServer(eng, store, renderer, host=host, port=port, history_mode=history, uds=uds,
                         policy=policy, served_model=Path(model_dir).name, max_body_bytes=int(max_body_mb * 1024 * 1024),
                         rollout_quota=int(rollout_quota_mb * 1024 * 1024), drain_s=drain_s,
                         keep_alive_s=keep_alive_s, header_timeout_s=header_timeout_s)
    try:
        server.start()
    except ProxyStartError as err:
        console.print(f"[red]error:[/red] {err} (pick another --port)")
        raise typer.Exit(code=2) from None
    _print_urls(console, server, run_dir)
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


def _run_defaults(engine: Optional[str], max_tokens: Optional[int],
                  default_temperature: Optional[float]) -> tuple[str, int, float]:
    """The flags not given take the training run's defaults (RunConfig): engine.type, loop.max_tokens,
    serve.default_temperature."""
    from harnessrl.run.config import RunConfig

    run = RunConfig()
    return (engine if engine is not None else run.engine.type,
            max_tokens if max_tokens is not None else run.loop.max_tokens,
            default_temperature if default_temperature is not None else run.serve.default_temperature)


def serving_policy(max_tokens: Optional[int], max_tokens_cap: Optional[int], default_temperature: Optional[float],
                   default_top_p: Optional[float], force: tuple[str, ...]) -> Any:
    """The ServingPolicy of `serve`'s flags, the training run's (RunConfig.serving_policy()) for the
    flags not given. As in a run, the max-tokens default is also the cap (a harness asking for 32k
    gets at most that) unless --max-tokens-cap names another. A value out of its bound is a usage
    error (exit 2) that names the flag."""
    from pydantic import ValidationError

    from harnessrl.run.config import RunConfig

    base = RunConfig().serving_policy()
    given = {"default_max_tokens": max_tokens, "default_temperature": default_temperature,
             "default_top_p": default_top_p}
    values = {**base.model_dump(), **{k: v for k, v in given.items() if v is not None}, "force": force}
    values["max_tokens_cap"] = max_tokens_cap if max_tokens_cap is not None else values["default_max_tokens"]
    try:
        return type(base).model_validate(values)
    except ValidationError as err:
        flags = {"default_max_tokens": "--max-tokens", "max_tokens_cap": "--max-tokens-cap",
                 "default_temperature": "--default-temperature", "default_top_p": "--default-top-p"}
        bad = "; ".join(f"{flags.get(str(e['loc'][0]), e['loc'][0])} {e['input']}: {e['msg'].lower()}"
                        for e in err.errors())
        raise typer.BadParameter(bad) from None


def _raise_interrupt(signum: int, frame: Any) -> None:
    """SIGTERM stops `serve` the way Ctrl-C does: graceful drain, then exit 0."""
    raise KeyboardInterrupt


def _print_urls(console: Any, server: Any, run_dir: Path) -> None:
    from rich.table import Table

    urls = server.base_urls()
    table = Table(title=f"harnessrl proxy: {server.served_model} (any model name is accepted)")
    table.add_column("protocol")
    table.add_column("base URL")
    table.add_row("OpenAI Chat Completions", urls["openai"])
    table.add_row("Anthropic Messages", urls["anthropic"])
    table.add_row("OpenAI Responses", urls["responses"])
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
