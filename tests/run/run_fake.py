"""Subprocess entry for the resume test: a short run with the in-process fakes."""

from __future__ import annotations

import sys

from harnessrl.config import load_config
from harnessrl.run.loop import run_training

from fakes import fake_collector_factory, fake_tasks  # noqa: E402  (run with tests/run on sys.path)

if __name__ == "__main__":
    cfg = load_config(None, sys.argv[3:])
    run_training(cfg, resume=sys.argv[2] == "resume", collector_factory=fake_collector_factory(float(sys.argv[1])),
                 tasks_loader=fake_tasks)
