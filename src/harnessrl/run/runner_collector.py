"""The real rollout side of the loop: the job runner behind the proxy, and which collector a run uses.

`RunnerCollector` starts one in-process ProxyServer over the run's engine and store, and runs the
loop's group plans with `harnessrl.rollout.jobs.run_plans` (fresh sandbox, the harness as a black
box, the verifier; the same runner as `harnessrl rollout` / `harnessrl eval`). `default_collector`
picks it, or (cluster.backend=ray) rollout workers as Ray actors, each running a RunnerCollector of
the run's config over its own proxy and store shard (cluster/ reads no run config and imports
nothing from run/; the local backend imports nothing from cluster/).
"""

from __future__ import annotations

import contextlib
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from harnessrl.engine import make_engine, resolve_model
from harnessrl.engine.base import Engine
from harnessrl.engine.factory import EngineConfig
from harnessrl.harness import HarnessAdapter, HarnessConfigError, start_hint
from harnessrl.harness.command import shell_tool_overrides
from harnessrl.proxy.server import ProxyServer
from harnessrl.render.bash_format import ShellOverride
from harnessrl.render.renderer import Renderer
from harnessrl.rollout.jobs import RunOptions, make_adapters, run_plans
from harnessrl.rollout.plan import GroupPlan
from harnessrl.rollout.proxy_link import LocalProxy
from harnessrl.rollout.sample_check import SampleCheck
from harnessrl.run.collector import Collector, Progress
from harnessrl.run.config import RunConfig
from harnessrl.run.errors import TrainError
from harnessrl.sandbox.base import SandboxConfig
from harnessrl.store import RunStore


def run_renderer(cfg: RunConfig, model_dir: Path | str,
                 shell_overrides: tuple[ShellOverride, ...] | None = None) -> Renderer:
    """The renderer `cfg` serves with, wherever it serves (training, rollout, eval, `serve
    --from-run`, `harness check`, reference demos): render.tool_format and the shell tools its
    `command:` harnesses name (harness/command.py: shell_tool_overrides; `shell_overrides` when the
    caller serves other harnesses than the config's), so a served prompt is rendered as the run trained."""
    if shell_overrides is None:
        entries = cfg.harness_entries()
        shell_overrides = shell_tool_overrides([h.name for h in entries], {h.name: dict(h.options) for h in entries})
    return Renderer.from_pretrained(model_dir, tool_format=cfg.render.tool_format, shell_overrides=shell_overrides)


def served_model_dir(model: str | None, scripted: bool) -> Path:
    """The model directory to serve: `model` (an HF dir or id; None: the default model) resolved,
    downloaded if need be; for the scripted engine without one, only the default model's tokenizer
    (no weights are loaded). ModelNotFound when it cannot be had."""
    from harnessrl.engine.model import smollm2_tokenizer_dir

    return Path(smollm2_tokenizer_dir() if scripted and model is None else resolve_model(model))


def engine_config(cfg: RunConfig, model_dir: Path, renderer: Renderer, scripted: bool,
                  script: Callable[[Renderer], Any] | None = None) -> EngineConfig:
    """The run's engine settings over `model_dir`; scripted: no weights, `script(renderer)` answers
    (default: one fixed reply)."""
    if not scripted:
        return cfg.engine.for_model(str(model_dir))
    if script is None:
        reply = list(renderer.encode("Hello from the scripted engine.")) + [renderer.eot_id]
        return EngineConfig(type="scripted", model=str(model_dir), max_model_len=cfg.engine.max_model_len,
                            script=lambda prompt_ids: reply, eos_ids=(renderer.eot_id,))
    return EngineConfig(type="scripted", model=str(model_dir), max_model_len=cfg.engine.max_model_len,
                        script=script(renderer), eos_ids=tuple(renderer.stop_ids))


@contextlib.contextmanager
def local_proxy(cfg: RunConfig, store: RunStore, scripted: bool = False,
                shell_overrides: tuple[ShellOverride, ...] | None = None,
                script: Callable[[Renderer], Any] | None = None) -> Iterator[LocalProxy]:
    """An engine and a started proxy in this process, serving as `cfg` trains (`run_renderer`,
    `start_proxy`): the one way `harnessrl rollout` / `eval` / `harness check` / `demos` stand up
    serving; the store records how (meta "render" and "serve"). `scripted`: no weights, `script`
    (renderer -> the scripted engine's script) or one fixed reply."""
    model_dir = served_model_dir(cfg.model.path, scripted)
    renderer = run_renderer(cfg, model_dir, shell_overrides)
    engine = make_engine(engine_config(cfg, model_dir, renderer, scripted, script))
    server = None
    try:
        server = start_proxy(cfg, engine, store, renderer)
        yield LocalProxy(server)
    finally:
        if server is not None:
            server.stop()
        engine.close()


def start_proxy(cfg: RunConfig, engine: Engine, store: RunStore, renderer: Renderer) -> ProxyServer:
    """The started proxy that serves `cfg`'s way: its serving policy
    (`RunConfig.serving_policy()`: loop.max_tokens as every call's default and cap, serve.*), the
    renderer of render.tool_format. Training and `harnessrl rollout` / `eval` both come here."""
    return ProxyServer(engine, store, renderer, policy=cfg.serving_policy()).start()


class RunnerCollector:
    """Rollouts through the real runner: proxy (in-process) -> sandbox -> harness -> verifier."""

    def __init__(self, cfg, engine: Any, store: Any, model_dir: Path):
        self.cfg, self.store = cfg, store
        self.proxy = start_proxy(cfg, engine, store, run_renderer(cfg, model_dir))  # the way `harnessrl eval --from-run` serves
        self.sandbox_cfg = SandboxConfig(type=cfg.sandbox.type, host_uid=cfg.sandbox.host_uid)
        self.samples = SampleCheck(_warn)  # token-identical GRPO groups: warned once per run
        self._adapters: dict[str, HarnessAdapter] = {}
        try:
            for h in cfg.harness_entries():
                self._check(h.name)
        except Exception:
            self.proxy.stop()
            raise

    def _check(self, name: str) -> None:
        """Fail at start, with the fix, when a harness is unknown or not installed."""
        try:
            adapter = self._adapter(name)
        except (HarnessConfigError, TypeError) as err:
            raise TrainError(f"harness {name!r}: {err}") from err
        problem = adapter.preflight()
        if problem:
            raise TrainError(f"harness {name!r} cannot run: {problem} ({start_hint(name)})")

    def _adapter(self, name: str) -> HarnessAdapter:
        if name not in self._adapters:
            opts = next((dict(h.options) for h in self.cfg.harness_entries() if h.name == name), {})
            self._adapters.update(make_adapters({name}, {name: opts}))
        return self._adapters[name]

    def run(self, plans: Sequence[GroupPlan], progress: Progress | None = None) -> None:
        loop = self.cfg.loop
        for name in {p.harness for p in plans}:
            self._adapter(name)
        opts = RunOptions(sandbox_cfg=self.sandbox_cfg, max_turns=loop.max_turns,
                          harness_timeout_s=loop.rollout_timeout_s,
                          memory_reserve_gib=loop.memory_reserve_gib)
        on_done = (lambda rec: progress(1, rec.harness, rec.status)) if progress else None
        run_plans(plans, proxy=LocalProxy(self.proxy), store=self.store, opts=opts, adapters=self._adapters,
                  concurrency=loop.concurrency, on_done=on_done)
        self.samples.check(self.store, [(p.group_id, [j.rollout_id for j in p.jobs()]) for p in plans])

    def close(self) -> None:
        self.proxy.stop()


def _warn(message: str) -> None:
    from rich.console import Console

    Console(stderr=True).print(f"[yellow]warning:[/yellow] {message}")


def default_collector(cfg: Any, engine: Any, store: Any, run_dir: Path) -> Collector:
    """RunnerCollector in this process, or (cluster.backend=ray) rollout workers as Ray actors,
    each running a RunnerCollector of the run's config over its own proxy and store shard."""
    model_dir = Path(resolve_model(cfg.model.path))
    if cfg.cluster.backend == "ray":
        from harnessrl.cluster.ray_rollout import RayCollector

        r = cfg.cluster.ray
        return RayCollector(partial(RunnerCollector, cfg, model_dir=model_dir), engine, store,
                            workers=r.rollout_workers, cpus=r.worker_cpus, shard_root=r.shard_dir)
    return RunnerCollector(cfg, engine, store, model_dir)
