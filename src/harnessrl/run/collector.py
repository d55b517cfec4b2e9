"""The real rollout side of the loop: the task suite and the job runner behind the proxy.

`RunnerCollector` starts one in-process ProxyServer over the run's engine and store, and runs the
loop's group plans with `harnessrl.rollout.jobs.run_plans` (fresh sandbox, the harness as a black
box, the verifier; the same runner as `harnessrl rollout` / `harnessrl eval`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from harnessrl.rollout.jobs import RunOptions, make_adapters, run_plans
from harnessrl.rollout.plan import GroupPlan
from harnessrl.rollout.proxy_link import LocalProxy
from harnessrl.run.collect import Progress
from harnessrl.run.errors import TrainError


def default_tasks(cfg) -> tuple[list, list]:
    """(train, eval) tasks: `tasks.suite` is "builtin" or a task directory; families filter them."""
    from harnessrl.tasks.loader import load_tasks
    from harnessrl.tasks.model import TaskError

    t = cfg.tasks
    try:
        if t.suite == "builtin":
            train, test = load_tasks(f"builtin:{t.train_split}"), load_tasks(f"builtin:{t.eval_split}")
        else:
            everything = load_tasks(t.suite)
            train = [x for x in everything if x.split == t.train_split]
            test = [x for x in everything if x.split == t.eval_split]
    except TaskError as err:
        raise TrainError(f"tasks: {err}") from err
    if t.families:
        keep = set(t.families)
        train = [x for x in train if x.family in keep or x.category in keep]
        test = [x for x in test if x.family in keep or x.category in keep]
    if not train:
        raise TrainError(f"no training tasks for tasks={t.model_dump()}; check tasks.families / tasks.suite")
    return train, _interleave_families(test)


def _interleave_families(tasks: list) -> list:
    """Eval order that takes one task per family in turn, so the first k cover many families."""
    by_family: dict[str, list] = {}
    for t in tasks:
        by_family.setdefault(t.family or t.category, []).append(t)
    out, queues = [], list(by_family.values())
    while any(queues):
        for q in queues:
            if q:
                out.append(q.pop(0))
    return out


class RunnerCollector:
    """Rollouts through the real runner: proxy (in-process) -> sandbox -> harness -> verifier."""

    def __init__(self, cfg, engine: Any, store: Any, model_dir: Path):
        from harnessrl.proxy.server import ProxyServer
        from harnessrl.render.renderer import Renderer
        from harnessrl.sandbox.base import SandboxConfig

        self.cfg, self.store = cfg, store
        renderer = Renderer.from_pretrained(model_dir, tool_format=cfg.render.tool_format)
        self.proxy = ProxyServer(engine, store, renderer,
                                 default_max_tokens=cfg.loop.max_tokens).start()
        self.sandbox_cfg = SandboxConfig(type=cfg.sandbox.type)
        self._adapters: dict[str, Any] = {}
        try:
            for h in cfg.harnesses:
                self._check(h.name)
        except Exception:
            self.proxy.stop()
            raise

    def _check(self, name: str) -> None:
        """Fail at start, with the fix, when a harness is unknown or not installed."""
        from harnessrl.harness import HarnessConfigError

        try:
            adapter = self._adapter(name)
        except (HarnessConfigError, TypeError) as err:
            raise TrainError(f"harness {name!r}: {err}") from err
        problem = adapter.preflight() if hasattr(adapter, "preflight") else None
        if problem:
            raise TrainError(f"harness {name!r} cannot run: {problem} (try `harnessrl harness install {name}`)")

    def _adapter(self, name: str) -> Any:
        if name not in self._adapters:
            opts = next((dict(h.options) for h in self.cfg.harnesses if h.name == name), {})
            self._adapters.update(make_adapters({name}, {name: opts}))
        return self._adapters[name]

    def run(self, plans: Sequence[GroupPlan], progress: Progress | None = None) -> None:
        loop = self.cfg.loop
        for name in {p.harness for p in plans}:
            self._adapter(name)
        opts = RunOptions(sandbox_cfg=self.sandbox_cfg, max_turns=loop.max_turns,
                          harness_timeout_s=loop.rollout_timeout_s)
        run_plans(plans, proxy=LocalProxy(self.proxy), store=self.store, opts=opts, adapters=self._adapters,
                  concurrency=loop.concurrency, on_done=(lambda _: progress(1)) if progress else None)

    def close(self) -> None:
        self.proxy.stop()


def default_collector(cfg, engine: Any, store: Any, run_dir: Path):
    """RunnerCollector in this process, or (cluster.backend=ray) rollout workers as Ray actors."""
    from harnessrl.engine import resolve_model

    model_dir = Path(resolve_model(cfg.model.path))
    if cfg.cluster.backend == "ray":
        from harnessrl.cluster.ray_rollout import RayCollector

        r = cfg.cluster.ray
        return RayCollector(cfg, engine, store, model_dir, workers=r.rollout_workers, cpus=r.worker_cpus,
                            shard_root=r.shard_dir)
    return RunnerCollector(cfg, engine, store, model_dir)
