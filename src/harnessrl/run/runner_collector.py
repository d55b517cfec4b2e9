"""The real rollout side of the loop: the job runner behind the proxy, and which collector a run uses.

`RunnerCollector` starts one in-process proxy over the run's engine and store (harnessrl.launch
`start_proxy`, the one proxy constructor), and runs the loop's group plans with
`harnessrl.rollout.jobs.run_plans` (fresh sandbox, the harness as a black box, the verifier; the same runner as `harnessrl rollout` / `harnessrl eval`). `default_collector`
picks it, or (cluster.backend=ray) rollout workers as Ray actors, each running a RunnerCollector of
the run's config over its own proxy and store shard (cluster/ reads no run config and imports
nothing from run/; the local backend imports nothing from cluster/).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Sequence, cast

from harnessrl.engine import resolve_model
from harnessrl.harness import HarnessAdapter, HarnessConfigError, start_hint
from harnessrl.launch import run_renderer, start_proxy
from harnessrl.rollout.jobs import RunOptions, make_adapters, run_plans
from harnessrl.rollout.plan import GroupPlan
from harnessrl.rollout.proxy_link import LocalProxy
from harnessrl.rollout.sample_check import SampleCheck
from harnessrl.run.collector_seam import Collector, Progress
from harnessrl.run.errors import TrainError
from harnessrl.sandbox.base import SandboxConfig

if TYPE_CHECKING:
    from harnessrl.cluster.ray_engine import RayEngine
    from harnessrl.config import RunConfig
    from harnessrl.engine.base import Engine
    from harnessrl.store.run_store import RunStore


class RunnerCollector:
    """Rollouts through the real runner: proxy (in-process) -> sandbox -> harness -> verifier."""

    def __init__(self, cfg: RunConfig, engine: Engine, store: RunStore, model_dir: Path) -> None:
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
                          memory_reserve_gib=loop.memory_reserve_gib, warm=loop.warm_pool)
        on_done = (lambda rec: progress(1, rec.harness, rec.status)) if progress else None
        run_plans(plans, proxy=LocalProxy(self.proxy), store=self.store, opts=opts, adapters=self._adapters,
                  concurrency=loop.concurrency, on_done=on_done)
        self.samples.check(self.store, [(p.group_id, [j.rollout_id for j in p.jobs()]) for p in plans])

    def close(self) -> None:
        self.proxy.stop()


__all__ = ["RunnerCollector", "default_collector"]


def _warn(message: str) -> None:
    from rich.console import Console

    Console(stderr=True).print(f"[yellow]warning:[/yellow] {message}")


def default_collector(cfg: RunConfig, engine: Engine, store: RunStore, run_dir: Path) -> Collector:
    """RunnerCollector in this process, or (cluster.backend=ray) rollout workers as Ray actors,
    each running a RunnerCollector of the run's config over its own proxy and store shard."""
    model_dir = Path(resolve_model(cfg.model.path))
    if cfg.cluster.backend == "ray":
        from harnessrl.cluster.ray_rollout import RayCollector

        r = cfg.cluster.ray
        ray_engine = cast("RayEngine", engine)  # cluster.backend=ray opens the run's engine as a RayEngine (ray_run.py)
        return RayCollector(partial(RunnerCollector, cfg, model_dir=model_dir), ray_engine, store,
                            workers=r.rollout_workers, cpus=r.worker_cpus, shard_root=r.shard_dir)
    return RunnerCollector(cfg, engine, store, model_dir)
