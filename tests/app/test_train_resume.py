"""`harnessrl train --resume` decides from the run directory before any engine starts: no run there is
refused with the fix, a complete run says so and exits 0, a changed training setting is refused by
name unless --allow-change names it, and then the change is recorded in the run. The run directories
are built by hand (a run store with a stored config and step rows); run_training must never be called."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from harnessrl.app.main import app
from harnessrl.run import loop
from harnessrl.config import load_config
from harnessrl.run.resume import CHANGES_KEY, is_operational
from harnessrl.store import RunStore

BASE = ["harnesses=[{name: builtin}]", "sandbox.type=local", "loop.steps=8"]


def _run_dir(path, steps: int, overrides=BASE, eval_last: bool = True, report: bool = True):
    """A run dir as `harnessrl train` leaves it after `steps` steps: stored config, step rows, report."""
    cfg = load_config(None, [*overrides, f"output.run_dir={path}"])
    with RunStore(path) as store:
        store.set_meta("config", cfg.model_dump(mode="json"))
        store.set_meta("attempt", 2)
        for s in range(steps + 1):
            row = {"policy_version": s, "time": {}}
            if s in (0, steps) and (eval_last or s == 0):
                row["eval"] = {"builtin": 0.5}
            store.put_step(s, row)
    if report:
        (path / "report.md").write_text("# report\n")
    return path


@pytest.fixture
def no_training(monkeypatch):
    """run_training (the engine, the trainer) must not start: calling it fails the test."""
    started = []
    monkeypatch.setattr(loop, "run_training", lambda *a, **k: started.append(k) or pytest.fail("engine started"))
    monkeypatch.setattr("harnessrl.app.train.refuse_problems", lambda cfg, console: None)  # host checks elsewhere
    return started


def _train(tmp_path, *args):
    return CliRunner().invoke(app, ["train", *BASE, f"output.run_dir={tmp_path}", *args], terminal_width=300)


def test_resume_refuses_a_directory_that_holds_no_run(tmp_path, no_training):
    for where in (tmp_path / "missing", tmp_path):
        r = CliRunner().invoke(app, ["train", "--resume", *BASE, f"output.run_dir={where}"], terminal_width=300)
        assert r.exit_code == 2 and "holds no run to resume" in r.output and "without --resume" in r.output
        assert len(r.output.strip().splitlines()) == 1, r.output  # one line with the fix
    assert not (tmp_path / "missing").exists()  # nothing was created


def test_resume_of_a_complete_run_says_so_without_an_engine(tmp_path, no_training):
    _run_dir(tmp_path, 8)
    r = _train(tmp_path, "--resume")
    assert r.exit_code == 0, r.output
    assert "run complete (8/8 steps): raise loop.steps to continue" in r.output
    with RunStore(tmp_path) as store:
        assert store.get_meta("attempt") == 2  # no new attempt was started


@pytest.fixture
def fake_training(monkeypatch, tmp_path):
    """run_training replaced by a recorder of the config it was given (no engine, no trainer)."""
    seen = []

    def record(cfg, **kw):
        seen.append((cfg, kw["resume"]))
        return SimpleNamespace(report=tmp_path / "report.md")

    monkeypatch.setattr(loop, "run_training", record)
    monkeypatch.setattr("harnessrl.app.train.refuse_problems", lambda cfg, console: None)
    return seen


def test_resume_with_more_steps_goes_on(tmp_path, fake_training):
    _run_dir(tmp_path, 8)
    r = _train(tmp_path, "--resume", "loop.steps=12")  # loop.steps may change: it is how a run goes on
    assert r.exit_code == 0, r.output
    assert [(cfg.loop.steps, resume) for cfg, resume in fake_training] == [(12, True)]


def test_a_run_whose_last_step_lacks_its_eval_is_not_complete(tmp_path):
    from harnessrl.run.resume import plan_resume

    _run_dir(tmp_path, 8, eval_last=False)
    cfg = load_config(None, [*BASE, f"output.run_dir={tmp_path}"])
    assert plan_resume(cfg).complete is None  # the closing eval still has to run
    (tmp_path / "report.md").unlink()
    _run_dir(tmp_path, 8, report=False)
    assert plan_resume(cfg).complete is None  # no report yet: the run still has to finish


def test_resume_refuses_a_changed_training_setting_by_name(tmp_path, no_training):
    _run_dir(tmp_path, 3)
    r = _train(tmp_path, "--resume", "optimizer.lr=2e-6")
    text = " ".join(r.output.split())
    assert r.exit_code == 2 and "optimizer.lr" in text and "--allow-change optimizer.lr" in text, r.output
    assert "1e-06" in text and "2e-06" in text


def test_an_allowed_change_is_recorded_in_the_run(tmp_path, fake_training):
    _run_dir(tmp_path, 3)
    r = _train(tmp_path, "--resume", "optimizer.lr=2e-6", "--allow-change", "optimizer.lr")
    assert r.exit_code == 0, r.output
    assert [cfg.optimizer.lr for cfg, _ in fake_training] == [2e-6]
    assert "changed setting" in r.output and "optimizer.lr" in r.output
    with RunStore(tmp_path) as store:
        assert store.get_meta(CHANGES_KEY) == [{"attempt": 3, "key": "optimizer.lr", "before": 1e-6, "after": 2e-6}]


def test_allow_change_without_resume_is_a_usage_error(tmp_path, no_training):
    r = _train(tmp_path, "--allow-change", "optimizer.lr")
    assert r.exit_code == 2 and "--resume" in r.output


def test_which_settings_change_the_training():
    assert is_operational("loop.steps") and is_operational("output.progress_every_s")
    assert is_operational("engine.max_batch") and is_operational("cluster.ray.num_cpus")
    assert not is_operational("optimizer.lr") and not is_operational("algorithm.name")
    assert not is_operational("loop.stepsize") and not is_operational("engine.dtype")


def test_resume_without_config_continues_with_the_runs_own_config(tmp_path, fake_training):
    _run_dir(tmp_path, 8, overrides=[*BASE, "optimizer.lr=3e-6", "serve.max_tokens=64"])
    r = CliRunner().invoke(app, ["train", "--resume", f"output.run_dir={tmp_path}"], terminal_width=300)
    assert r.exit_code == 0 and "run complete (8/8 steps)" in r.output, r.output  # not refused: its own settings
    r = CliRunner().invoke(app, ["train", "--resume", f"output.run_dir={tmp_path}", "loop.steps=10"])
    assert r.exit_code == 0, r.output
    ((cfg, resume),) = fake_training
    assert resume and (cfg.loop.steps, cfg.optimizer.lr, cfg.serve.max_tokens) == (10, 3e-6, 64)
