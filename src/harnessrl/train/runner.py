"""The real rollout side of the loop: the built-in task suite and the runner behind the proxy."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def default_tasks(cfg) -> tuple[list, list]:
    """(train, eval) tasks of the configured suite."""
    from harnessrl.train.loop import TrainError

    raise TrainError("the task suite loader is not wired yet")


def default_collector(cfg, engine: Any, store: Any, run_dir: Path):
    from harnessrl.train.loop import TrainError

    raise TrainError("the rollout runner is not wired yet")
