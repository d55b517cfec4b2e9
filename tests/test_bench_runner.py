"""`make bench` runs benchmarks/run_all.py, which refuses a benchmark script it has no quick mode
(or reason to skip) for: every script next to it must be known, or `make bench` runs nothing."""

from __future__ import annotations

import importlib.util
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def test_every_benchmark_script_has_a_quick_mode_or_a_reason_to_skip():
    spec = importlib.util.spec_from_file_location("run_all", BENCH / "run_all.py")
    assert spec is not None and spec.loader is not None
    run_all = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_all)
    found = run_all.scripts()  # raises SystemExit naming an unknown script
    assert "tree_sharing.py" in found and not set(run_all.QUICK) & set(run_all.SKIP)
    assert all((BENCH / s).is_file() for s in [*run_all.QUICK, *run_all.SKIP])
