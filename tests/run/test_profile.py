"""The cost budget (run/profile.py): a scripted run's profile adds up to the wall and CPU it took."""

from __future__ import annotations

import resource
import time

import pytest
from rich.console import Console
from typer.testing import CliRunner

from harnessrl.app.main import app
from harnessrl.engine import make_tiny_model
from harnessrl.run.config import load_config
from harnessrl.run.display import RunDisplay
from harnessrl.run.loop import close_run, open_run, record_step, step_line, train_step
from harnessrl.run.profile_view import profile_markdown
from harnessrl.run.profile import (CpuMeter, RunProfile, add_calls, add_rollouts, cache_text,
                                   profile_run_dir)
from harnessrl.run.profile_view import phase_rows
from harnessrl.run.record import EngineWork, StepRecord
from harnessrl.store.records import RolloutRecord

from .fakes import fake_collector_factory, fake_tasks
from .test_loop import overrides


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=3)


def cpu_now() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def test_profile_of_a_scripted_run_adds_up_to_the_measured_wall_and_cpu(tiny_dir, tmp_path):
    run_dir = tmp_path / "run"
    cfg = load_config(None, overrides(tiny_dir, run_dir, steps=2) + ["loop.eval_every=1"])
    parts = open_run(cfg, False, Console(quiet=True), fake_collector_factory(delay_s=0.05), fake_tasks)
    walls, cpus = [], []
    try:
        with RunDisplay(Console(quiet=True), 2, 1) as display:
            for step in (1, 2):
                t0, c0 = time.perf_counter(), cpu_now()
                rec = train_step(parts, step, display)
                walls.append(time.perf_counter() - t0)
                cpus.append(cpu_now() - c0)
                record_step(parts.store, parts.log, step, rec)
    finally:
        close_run(parts)
    prof = profile_run_dir(run_dir)
    assert prof.steps == 2 and prof.n_rollouts > 0
    named = sum(c.wall_s or 0.0 for p, c in prof.phases.items() if p != "other")
    measured = sum(walls)
    assert abs(named - measured) <= 0.1 * measured  # the phases account for the step's wall
    assert abs(prof.step_wall_s - measured) <= 0.1 * measured
    cpu = sum(prof.processes.values())
    assert abs(cpu - sum(cpus)) <= 0.1 * sum(cpus) + 0.05  # every CPU second of the steps, once
    assert {"rollout", "train", "sync", "eval"} <= set(prof.phases)
    lines = profile_markdown(prof)
    assert lines[0].startswith("## Cost budget") and any(line.startswith("| trainer update") for line in lines)
    out = CliRunner().invoke(app, ["profile", str(run_dir)])
    assert out.exit_code == 0, out.output
    assert "per step phase" in out.output and "weight sync" in out.output


def test_profile_refuses_a_dir_without_a_run(tmp_path):
    out = CliRunner().invoke(app, ["profile", str(tmp_path)])
    assert out.exit_code == 2 and "holds no run" in out.output


def test_rollout_components_come_from_the_records():
    prof = RunProfile()
    meta = {"harness_meta": {"cpu_s": {"harness_user_s": 0.2, "harness_system_s": 0.05, "launcher_user_s": 0.02,
                                       "launcher_system_s": 0.01}}}
    add_rollouts(prof, [RolloutRecord("r1", "t", "codex", "s1-a1-g0", "ok", 1.0, meta=meta,
                                      durations={"sandbox_s": 0.1, "harness_s": 2.0, "verifier_s": 0.3,
                                                 "total_s": 2.5}),
                        RolloutRecord("r2", "t", "codex", "eval-test-s1-a1-codex-0", "ok", 0.0,
                                      durations={"sandbox_s": 0.1, "harness_s": 1.0, "total_s": 1.2})])
    assert prof.rollouts == {"rollout": 1, "eval": 1}
    c = prof.components
    assert c["harness"].wall_s == pytest.approx(3.0) and c["harness"].cpu_s == pytest.approx(0.25)
    assert c["launcher"].cpu_s == pytest.approx(0.03)
    assert c["rest"].wall_s == pytest.approx(0.2)
    add_calls(prof, [{"n_prompt": 1000, "meta": {"timings": {"render_s": 0.01, "respond_s": 0.002,
                                                             "engine_cached_tokens": 800, "engine_prefill_s": 0.5}}},
                     {"n_prompt": 50, "meta": {"timings": {"render_s": 0.01}}}])  # no engine report: not counted
    assert prof.reported_calls == 1 and prof.cache_hit_rate == pytest.approx(0.8)
    assert c["proxy"].wall_s == pytest.approx(0.022)


def test_step_record_keeps_engine_work_cpu_and_wall_and_the_step_line_shows_the_cache():
    work = EngineWork(engine_requests=4, engine_prompt_tokens=1000, engine_cached_tokens=750, engine_reported=4,
                      engine_prefill_s=1.5, engine_decode_s=2.0)
    rec = StepRecord(policy_version=3, time={"rollout": 2.0}, engine=work, cpu={"rollout": {"run": 0.5}}, wall_s=2.1)
    back = StepRecord.from_json(rec.to_json())
    assert back.engine == work and back.cpu == {"rollout": {"run": 0.5}} and back.wall_s == 2.1
    assert work.cache_hit_rate == pytest.approx(0.75)
    assert "prefix cache 75% (computed 250/1000 prompt tokens)" in step_line(1, rec)
    assert cache_text(EngineWork(1, 10, 0, 0)) == ""  # the engine reported no cached counts


class CountingEngine:
    def __init__(self):
        self.sums = {"requests": 0.0, "prompt_tokens": 0.0, "cached_tokens": 0.0, "reported": 0.0}

    def counters(self):
        return dict(self.sums)


def test_cpu_meter_takes_the_engine_counters_over_the_step():
    engine = CountingEngine()
    engine.sums.update(requests=5, prompt_tokens=500, cached_tokens=100, reported=5)
    meter = CpuMeter(engine)
    engine.sums.update(requests=7, prompt_tokens=900, cached_tokens=400, reported=7)
    before = meter.begin()
    sum(i * i for i in range(200_000))
    meter.end("train", before)
    work = meter.engine_work()
    assert work is not None and work.engine_requests == 2 and work.engine_prompt_tokens == 400
    assert work.engine_cached_tokens == 300
    assert meter.phases["train"]["run"] > 0
    assert CpuMeter(object()).engine_work() is None


def test_phase_rows_end_with_the_total():
    prof = RunProfile()
    rows = phase_rows(prof)
    assert rows[-1][0].startswith("all steps")
