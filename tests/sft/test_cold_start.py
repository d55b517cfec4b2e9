"""The cold start of a run (sft/cold_start.py) without harnesses: off by default, reused once its
record exists, started over when an earlier try left no record, refused by experiments."""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessrl.config import load_config
from harnessrl.report.cold_start import ColdStart, cold_start_dir, cold_start_lines, read_cold_start, write_cold_start
from harnessrl.sft import cold_start as cs
from harnessrl.sft.demos import DemoResult
from harnessrl.sft.fine_tune import SFTResult


def _cfg(run_dir: Path, *extra: str):
    return load_config(None, [f"output.run_dir={run_dir}", "cold_start.tasks=[builtin:lookup:train]",
                              "cold_start.limit=2", *extra])


def _fake_parts(monkeypatch, passed: int, seen: dict):
    def demos(cfg, tasks, specs, run_dir, harness_options=None, progress=True, n=1):
        seen["tasks"], seen["specs"] = [t.id for t in tasks], specs
        run_dir.mkdir(parents=True)
        return DemoResult(str(run_dir), len(tasks) * len(specs), passed, {"ok": len(tasks) * len(specs)},
                          {specs[0]: passed} if passed else {})

    def sft(run_dirs, out_dir, opts, log=lambda line: None):
        seen["opts"] = opts
        (out_dir / "policy").mkdir(parents=True)
        return SFTResult(str(out_dir), str(out_dir / "policy"), "rejection", [str(d) for d in run_dirs], passed,
                         passed, 2 * passed, 10 * passed, 0.9, 0.1, 1, 1.5, [])

    monkeypatch.setattr("harnessrl.sft.demos.collect_demos", demos)
    monkeypatch.setattr("harnessrl.sft.fine_tune.run_sft", sft)


def test_off_by_default(tmp_path):
    cfg = load_config(None, [f"output.run_dir={tmp_path}"])
    assert not cfg.cold_start.enabled
    assert cs.ensure_cold_start(cfg) is None
    assert cold_start_lines(tmp_path) == []


def test_runs_demos_then_sft_with_the_sections_settings(tmp_path, monkeypatch):
    seen: dict = {}
    _fake_parts(monkeypatch, passed=2, seen=seen)
    cfg = _cfg(tmp_path, "harnesses=[{name: 'claude-code:tiny'}, {name: 'codex:small'}]",
               "cold_start.harnesses=[codex:small]", "cold_start.epochs=2", "cold_start.lr=2e-4")
    policy = cs.ensure_cold_start(cfg)
    assert policy == cold_start_dir(tmp_path) / "sft" / "policy"
    assert len(seen["tasks"]) == 2 and seen["specs"] == ["codex:small"]  # limit per selector; its own harnesses
    assert (seen["opts"].epochs, seen["opts"].lr, seen["opts"].model) == (2, 2e-4, None)
    record = read_cold_start(tmp_path)
    assert record is not None and (record.passed, record.sft_trees) == (2, 2)


def test_an_unfinished_try_is_started_over(tmp_path, monkeypatch):
    seen: dict = {}
    _fake_parts(monkeypatch, passed=2, seen=seen)
    stale = cold_start_dir(tmp_path) / "demos" / "half-written.sqlite"
    stale.parent.mkdir(parents=True)
    stale.write_text("x")
    cs.ensure_cold_start(_cfg(tmp_path))
    assert not stale.exists() and read_cold_start(tmp_path) is not None


def test_a_finished_one_is_reused(tmp_path, monkeypatch):
    cold_start_dir(tmp_path).mkdir(parents=True)
    write_cold_start(tmp_path, ColdStart("p/policy", 2, 2, 2, {"h": 2}, 2, 0.9, 0.1, 1.0, 2.0))
    monkeypatch.setattr("harnessrl.sft.demos.collect_demos", lambda *a, **k: pytest.fail("ran again"))
    assert cs.ensure_cold_start(_cfg(tmp_path)) == Path("p/policy")


def test_no_passing_demonstration_is_a_typed_error(tmp_path, monkeypatch):
    _fake_parts(monkeypatch, passed=0, seen={})
    with pytest.raises(cs.ColdStartError, match="no reference demonstration"):
        cs.ensure_cold_start(_cfg(tmp_path))
    assert read_cold_start(tmp_path) is None


def test_an_experiment_refuses_a_cold_start_per_run(tmp_path):
    from harnessrl.experiment.arms import ExperimentError, ExperimentSpec, plan_runs

    spec = ExperimentSpec(config=None, out=str(tmp_path), seeds=[0],
                          overrides=["cold_start.tasks=[builtin:lookup:train]"], arms={"a": ["loop.steps=1"]})
    with pytest.raises(ExperimentError, match="share their seed's baseline"):
        plan_runs(spec)


def test_rl_never_trains_on_a_demonstrated_task_unless_asked():
    from harnessrl.run.errors import TrainError
    from harnessrl.run.task_sets import default_tasks, demonstrated_tasks, without_demonstrated

    cfg = load_config(None, ["tasks.train_split=[builtin:lookup:train]", "cold_start.tasks=[builtin:lookup:train]",
                             "cold_start.limit=8"])
    train, _ = default_tasks(cfg)
    shown = [t.id for t in demonstrated_tasks(cfg.cold_start)]
    kept = without_demonstrated(train, cfg.cold_start)
    assert len(shown) == 8 and len(kept) == len(train) - 8
    assert not {t.id for t in kept} & set(shown)
    asked = cfg.cold_start.model_copy(update={"train_demonstrated": True})
    assert without_demonstrated(train, asked) == train
    everything = cfg.cold_start.model_copy(update={"limit": None})
    with pytest.raises(TrainError, match="train_demonstrated"):
        without_demonstrated(train, everything)
