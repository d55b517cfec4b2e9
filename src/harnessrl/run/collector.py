"""The real rollout side of the loop: the task suite and the job runner behind the proxy.

`RunnerCollector` starts one in-process ProxyServer over the run's engine and store, and runs the
loop's group plans with `harnessrl.rollout.jobs.run_plans` (fresh sandbox, the harness as a black
box, the verifier; the same runner as `harnessrl rollout` / `harnessrl eval`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from harnessrl.harness import HarnessConfigError
from harnessrl.render.renderer import Renderer
from harnessrl.rollout.jobs import RunOptions, make_adapters, run_plans
from harnessrl.rollout.plan import GroupPlan
from harnessrl.rollout.proxy_link import LocalProxy
from harnessrl.run.collect import Progress
from harnessrl.run.errors import TrainError
from harnessrl.run.serve_config import start_proxy
from harnessrl.sandbox.base import SandboxConfig
from harnessrl.tasks.loader import interleave_families, load_tasks
from harnessrl.tasks.model import TaskError


def default_tasks(cfg) -> tuple[list, dict[str, list]]:
    """(train tasks, {eval set name: tasks}): `tasks.suite` is "builtin" or a task directory;
    `tasks.families` filters the train split and every eval set but `unseen` (see TasksSection)."""
    t = cfg.tasks
    keep = set(t.families or ())

    def kept(tasks: list, name: str) -> list:
        if not keep or name in ("unseen", "builtin:unseen"):
            return tasks
        return [x for x in tasks if x.family in keep or x.category in keep]

    try:
        if t.suite == "builtin":
            def load(name: str) -> list:
                return load_tasks(name if name.startswith("builtin:") else f"builtin:{name}")
        else:
            everything = load_tasks(t.suite)

            def load(name: str) -> list:
                return [x for x in everything if x.split == name]
        train = kept(load(t.train_split), t.train_split)
        evals = {name: interleave_families(kept(load(name), name)) for name in t.eval_set_names()}
    except TaskError as err:
        raise TrainError(f"tasks: {err}") from err
    if not train:
        raise TrainError(f"no training tasks for tasks={t.model_dump()}; check tasks.families / tasks.suite")
    overlap = {x.id for x in train} & {x.id for ts in evals.values() for x in ts}
    if overlap:
        raise TrainError(f"eval sets share tasks with the train split: {sorted(overlap)[:5]}")
    return train, evals


class RunnerCollector:
    """Rollouts through the real runner: proxy (in-process) -> sandbox -> harness -> verifier."""

    def __init__(self, cfg, engine: Any, store: Any, model_dir: Path):
        self.cfg, self.store = cfg, store
        renderer = Renderer.from_pretrained(model_dir, tool_format=cfg.render.tool_format)
        self.proxy = start_proxy(cfg, engine, store, renderer)  # the way `harnessrl eval --from-run` serves
        self.sandbox_cfg = SandboxConfig(type=cfg.sandbox.type, host_uid=cfg.sandbox.host_uid)
        self._adapters: dict[str, Any] = {}
        try:
            for h in cfg.harnesses:
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
                          harness_timeout_s=loop.rollout_timeout_s,
                          memory_reserve_gib=loop.memory_reserve_gib)
        run_plans(plans, proxy=LocalProxy(self.proxy), store=self.store, opts=opts, adapters=self._adapters,
                  concurrency=loop.concurrency, on_done=(lambda rec: progress(1, rec.harness)) if progress else None)

    def close(self) -> None:
        self.proxy.stop()
