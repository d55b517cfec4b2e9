"""Reference demonstrations through the harness (a cold start): the reference policy
(sft/reference.py) served by the scripted engine behind the run's own proxy drives the
unmodified harnesses in their sandboxes on the given tasks; the proxy records every call as it
records a model's, the verifier scores each rollout, and `harnessrl sft RUN_DIR` trains on the
passing ones (rejection sampling, sft/data.py).

    result = collect_demos(cfg, tasks, ["claude-code:tiny"], run_dir=Path("runs/demos"))
    # then: harnessrl sft runs/demos --out runs/demos-sft; train model.path=runs/demos-sft/policy
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from harnessrl.sft.reference import reference_plan, reference_script

if TYPE_CHECKING:
    from harnessrl.rollout.proxy_link import LocalProxy
    from harnessrl.config import RunConfig
    from harnessrl.store.run_store import RunStore
    from harnessrl.tasks.model import Task


@dataclass(frozen=True)
class DemoResult:
    run_dir: str
    rollouts: int
    passed: int
    statuses: dict[str, int]
    passed_by_harness: dict[str, int] = field(default_factory=dict)
    failed_tasks: list[str] = field(default_factory=list)  # (harness, task) pairs the reference did not pass


@contextlib.contextmanager
def reference_proxy(cfg: RunConfig, store: RunStore, tasks: list[Task],
                    served: Mapping[str, Mapping[str, Any]] | None = None) -> Iterator[LocalProxy]:
    """A started proxy serving as `cfg` does (harnessrl.launch `local_proxy`: its renderer and
    serving policy) to the harnesses `served` (spec -> options; None: none of the config's), over
    the scripted engine of the reference policy for `tasks`. Only the tokenizer of `cfg`'s model is
    read, never its weights."""
    from harnessrl.launch import local_proxy

    reference_plan(tasks, cfg.render.tool_format)  # refuses before anything starts
    script = partial(reference_script, tasks=tasks, tool_format=cfg.render.tool_format)
    with local_proxy(cfg, store, scripted=True, served=served or {}, script=script) as link:
        yield link


def collect_demos(cfg: RunConfig, tasks: list[Task], specs: list[str], run_dir: Path, n: int = 1,
                  harness_options: dict[str, dict[str, Any]] | None = None, progress: bool = True) -> DemoResult:
    """Run every task x harness (n rollouts each) under the reference policy, stored in `run_dir`
    with split "demo"; returns what passed. The reference policy is deterministic: n > 1 repeats
    the same rollout unless the harness itself varies."""
    from harnessrl.rollout.jobs import run_groups
    from harnessrl.sandbox.base import SandboxConfig
    from harnessrl.store import RunStore

    options = harness_options or {}
    sandbox_cfg = SandboxConfig(type=cfg.sandbox.type, host_uid=cfg.sandbox.host_uid)
    with RunStore(run_dir) as store:
        with reference_proxy(cfg, store, tasks, {s: options.get(s, {}) for s in specs}) as link:
            records = run_groups(tasks, specs, n, proxy=link, store=store, sandbox_cfg=sandbox_cfg,
                                 concurrency=cfg.loop.concurrency, max_turns=cfg.loop.max_turns,
                                 harness_timeout_s=cfg.loop.rollout_timeout_s, harness_options=options,
                                 split="demo", progress=progress)
    by_id = {t.id: t for t in tasks}
    passed = [r for r in records if r.status == "ok" and by_id[r.task_id].passed(r.reward)]
    won = {(r.harness, r.task_id) for r in passed}
    return DemoResult(str(run_dir), len(records), len(passed), dict(Counter(r.status for r in records)),
                      dict(Counter(r.harness for r in passed)),
                      sorted({f"{r.harness}:{r.task_id}" for r in records if (r.harness, r.task_id) not in won}))
