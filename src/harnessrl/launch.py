"""Standing up serving: the one place a ProxyServer is built (`open_proxy`), with the renderer and
the engine a run config serves with. `harnessrl serve`, `train` (RunnerCollector), `rollout`,
`eval`, `harness check`, the SFT demos and white-box (which calls the proxy it binds to) all come
through here, so a served prompt is rendered and sampled as the run trains:

    with local_proxy(cfg, store) as link:            # rollout / eval / harness check / demos
        run_plans(plans, proxy=link, store=store, ...)
    server = start_proxy(cfg, engine, store, renderer)   # training: the run's own engine
    server = open_proxy(policy, renderer, engine, store, Transport(port=8000))   # `harnessrl serve`

The renderer takes render.tool_format and the shell tools the served `command[shell_tool=...]`
harnesses name (the config's, or those a command serves: `shell_tools`, computed here alone); the
scripted engine (no weights: one fixed reply, or a script)
is built by `scripted_engine` alone. This module sits above proxy/, engine/, render/ and harness/
and reads the config schema (harnessrl.config); only run/ and app/ import it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessrl.config import HarnessEntry, RunConfig
from harnessrl.engine import make_engine, resolve_model
from harnessrl.engine.base import Engine
from harnessrl.harness.command import shell_tool_overrides
from harnessrl.proxy.calls import DEFAULT_ROLLOUT_QUOTA
from harnessrl.proxy.server import DEFAULT_MAX_BODY_BYTES, ProxyServer
from harnessrl.proxy.serving import ServingPolicy
from harnessrl.render.bash_format import ShellOverride
from harnessrl.render.renderer import Renderer
from harnessrl.rollout.proxy_link import LocalProxy
from harnessrl.store import RunStore

SMOLLM2_WINDOW = 8192  # the default model's context (its tokenizer-only cache has no config.json)
SCRIPTED_REPLY = "Hello from the scripted engine."
Script = Callable[[list[int]], Sequence[int]]  # the scripted engine's policy: prompt ids -> reply ids


@dataclass(frozen=True)
class Transport:
    """Where and how a proxy listens (`harnessrl serve`'s flags; in-process proxies take the
    defaults: loopback, any free port)."""

    host: str = "127.0.0.1"
    port: int = 0
    uds: str | None = None
    history_mode: str = "exact"
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    rollout_quota: int = DEFAULT_ROLLOUT_QUOTA
    drain_s: float = 30.0
    keep_alive_s: float = 75.0
    header_timeout_s: float = 15.0


def open_proxy(policy: ServingPolicy, renderer: Renderer, engine: Engine, store: RunStore,
               transport: Transport = Transport(), served_model: str | None = None) -> ProxyServer:
    """The started proxy over `engine`, rendering with `renderer`, sampling by `policy`, recording into
    `store`: the one constructor of a ProxyServer (ProxyStartError when it cannot listen)."""
    t = transport
    return ProxyServer(engine, store, renderer, host=t.host, port=t.port, history_mode=t.history_mode, uds=t.uds,
                       policy=policy, served_model=served_model, max_body_bytes=t.max_body_bytes,
                       rollout_quota=t.rollout_quota, drain_s=t.drain_s, keep_alive_s=t.keep_alive_s,
                       header_timeout_s=t.header_timeout_s).start()


Served = Mapping[str, Mapping[str, Any]]  # the harnesses served: spec -> its options


def served_harnesses(harnesses: Sequence[HarnessEntry]) -> dict[str, dict[str, Any]]:
    """A config's harness entries as the harnesses served (spec -> options)."""
    return {h.name: dict(h.options) for h in harnesses}


def shell_tools(served: Served) -> tuple[ShellOverride, ...]:
    """The shell tools the `command:` harnesses among `served` name (harness/command.py), which the
    renderer drives with the bash format: the one computation, wherever a config serves."""
    return shell_tool_overrides(list(served), {spec: dict(opts) for spec, opts in served.items()})


def run_renderer(cfg: RunConfig, model_dir: Path | str, served: Served | None = None) -> Renderer:
    """The renderer `cfg` serves with, wherever it serves: render.tool_format and the shell tools of
    the `command:` harnesses served (`served`: spec -> options when a command serves other harnesses
    than the config's; None: the config's own, trained or evaluated through)."""
    overrides = shell_tools(served if served is not None else served_harnesses(cfg.harness_entries()))
    return Renderer.from_pretrained(model_dir, tool_format=cfg.render.tool_format, shell_overrides=overrides)


def served_model_dir(model: str | None, scripted: bool) -> Path:
    """The model directory to serve: `model` (an HF dir or id; None: the default model) resolved,
    downloaded if need be; for the scripted engine without one, only the default model's tokenizer
    (no weights are loaded). ModelNotFound when it cannot be had."""
    from harnessrl.engine.model import smollm2_tokenizer_dir

    return Path(smollm2_tokenizer_dir() if scripted and model is None else resolve_model(model))


def scripted_engine(model_dir: Path, renderer: Renderer, max_model_len: int | None,
                    script: Callable[[Renderer], Script] | None = None, latency_s: float = 0.0,
                    model_path: str = "scripted") -> Engine:
    """The scripted engine (no weights): `script(renderer)` answers, else one fixed sentence, after
    `latency_s` a call (a smoke-test / load-test policy). Its context is `max_model_len`, else the
    model's own window, else SmolLM2's. It keeps no log of its calls (a long `serve` grows nothing)."""
    from harnessrl.engine.model import model_context_window
    from harnessrl.engine.scripted import ScriptedEngine

    if script is None:
        reply = [*renderer.encode(SCRIPTED_REPLY), renderer.eot_id]
        policy: Script = lambda prompt_ids: reply  # noqa: E731
        eos: Sequence[int] = (renderer.eot_id,)
    else:
        policy, eos = script(renderer), tuple(renderer.stop_ids)
    window = max_model_len or model_context_window(model_dir) or SMOLLM2_WINDOW
    return ScriptedEngine(policy, model_path=model_path, max_model_len=window, eos_ids=eos, latency_s=latency_s,
                          record_calls=0)


def start_proxy(cfg: RunConfig, engine: Engine, store: RunStore, renderer: Renderer) -> ProxyServer:
    """The started proxy that serves `cfg`'s way (its serving policy, `serve.policy()`), in this
    process on a free loopback port: training and `rollout` / `eval` come here."""
    return open_proxy(cfg.serve.policy(), renderer, engine, store)


@contextlib.contextmanager
def local_proxy(cfg: RunConfig, store: RunStore, scripted: bool = False, served: Served | None = None,
                script: Callable[[Renderer], Any] | None = None) -> Iterator[LocalProxy]:
    """An engine and a started proxy in this process, serving as `cfg` trains (`run_renderer`,
    `start_proxy`): how `harnessrl rollout` / `eval` / `harness check` / the demos stand up serving;
    the store records how (meta "render" and "serve"). `served`: the harnesses it serves when other
    than the config's (`run_renderer`). `scripted`: no weights (`scripted_engine`)."""
    model_dir = served_model_dir(cfg.model.path, scripted)
    renderer = run_renderer(cfg, model_dir, served)
    engine = (scripted_engine(model_dir, renderer, cfg.engine.max_model_len, script) if scripted
              else make_engine(cfg.engine.for_model(str(model_dir))))
    server = None
    try:
        server = start_proxy(cfg, engine, store, renderer)
        yield LocalProxy(server)
    finally:
        if server is not None:
            server.stop()
        engine.close()
