"""Which collector a run uses: the job runner in this process, or rollout workers as Ray actors.

Kept apart from run/collector.py because the Ray workers themselves run a `RunnerCollector`:
cluster/ imports run.collector, and this module, above both, picks one of them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harnessrl.cluster.ray_rollout import RayCollector
from harnessrl.engine import resolve_model
from harnessrl.run.collect import Collector
from harnessrl.run.collector import RunnerCollector


def default_collector(cfg: Any, engine: Any, store: Any, run_dir: Path) -> Collector:
    """RunnerCollector in this process, or (cluster.backend=ray) rollout workers as Ray actors."""
    model_dir = Path(resolve_model(cfg.model.path))
    if cfg.cluster.backend == "ray":
        r = cfg.cluster.ray
        return RayCollector(cfg, engine, store, model_dir, workers=r.rollout_workers, cpus=r.worker_cpus,
                            shard_root=r.shard_dir)
    return RunnerCollector(cfg, engine, store, model_dir)
