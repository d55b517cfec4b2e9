"""Which collector a run uses: the job runner in this process, or rollout workers as Ray actors.

Kept apart from run/collector.py because the Ray workers themselves run a `RunnerCollector`: this
module, above both, hands the Ray backend a factory of RunnerCollectors (cluster/ reads no run
config and imports nothing from run/). The local backend imports nothing from cluster/.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from harnessrl.engine import resolve_model
from harnessrl.run.collect import Collector
from harnessrl.run.collector import RunnerCollector


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
