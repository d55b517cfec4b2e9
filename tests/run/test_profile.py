"""The cost budget (profile/run_profile.py): a scripted run's profile adds up to the wall and CPU it took."""

from __future__ import annotations

import json
import resource
import time

import pytest
from rich.console import Console
from typer.testing import CliRunner

from harnessrl.app.main import app
from harnessrl.engine import make_tiny_model
from harnessrl.config import load_config
from harnessrl.report.display import RunDisplay
from harnessrl.run.loop import record_step, step_line, train_step
from harnessrl.run.open_run import close_run, open_run
from harnessrl.profile.run_profile import (CpuMeter, RunProfile, add_calls, add_rollouts, cache_text,
                                   profile_run_dir)
from harnessrl.profile.tables import markdown, phase_rows
from harnessrl.report.record import EngineWork, StepRecord
from harnessrl.run.runner_collector import default_collector
from harnessrl.run.task_sets import default_tasks
from harnessrl.store.records import RolloutRecord



@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=3)


def cpu_now() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def runner_overrides(tiny_dir, run_dir):
    """A scripted short run through the real runner: the proxy, the builtin harness as a process in
    a local sandbox, the verifier in its fresh sandbox, the tiny random model in the hf engine."""
    return [f"model.path={tiny_dir}", "engine.type=hf", "sandbox.type=local", f"output.run_dir={run_dir}",
            "output.tensorboard=false", "harnesses=[{name: builtin, weight: 1}]", "tasks.families=[write_word]",
            "loop.steps=2", "loop.groups_per_step=1", "loop.n_per_group=2", "loop.eval_size=1", "loop.eval_every=2",
            "loop.max_turns=2", "serve.max_tokens=8", "loop.concurrency=2", "filters.truncated=keep",
            "algorithm.token_budget=4096"]


def test_profile_of_a_scripted_run_adds_up_to_the_measured_wall_and_cpu(tiny_dir, tmp_path):
    run_dir = tmp_path / "run"
    cfg = load_config(None, runner_overrides(tiny_dir, run_dir))
    parts = open_run(cfg, False, Console(quiet=True), default_collector, default_tasks)
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
    assert prof.steps == 2 and prof.rollouts.get("rollout") == 4 and prof.rollouts.get("eval", 0) >= 1
    # the steps: the phases add up to the wall measured around each step, less than 10% unaccounted
    measured = sum(walls)
    named = sum(c.wall_s or 0.0 for p, c in prof.phases.items() if p != "other")
    assert abs(named - measured) <= 0.1 * measured
    assert abs(prof.step_wall_s - measured) <= 0.1 * measured
    assert prof.unaccounted_step_share is not None and prof.unaccounted_step_share < 0.1
    cpu = sum(prof.processes.values())
    assert abs(cpu - sum(cpus)) <= 0.1 * sum(cpus) + 0.05  # every CPU second of the steps, once
    assert {"rollout", "train", "sync", "eval", "checkpoint"} <= set(prof.phases)
    # the update's parts lie inside the train phase
    if prof.trainer:  # the tiny random model's groups may all share one reward: then nothing trains
        assert set(prof.trainer) == {"old_logprobs_s", "forward_backward_s", "optimizer_s"}
        assert 0 < sum(prof.trainer.values()) <= prof.phases["train"].wall_s
    # a rollout: its recorded parts add up to its wall, less than 10% unaccounted
    c = prof.components
    assert {"sandbox_start", "harness", "verifier_copy_out", "verifier_sandbox", "verifier_check",
            "verifier_teardown", "sandbox_teardown", "total"} <= set(c)
    assert "verifier" not in c  # split into its stages
    parts_wall = sum(c[k].wall_s or 0.0 for k in c if k not in ("total", "rest", "proxy", "engine_prefill",
                                                                    "engine_decode", "launcher", "sandboxes",
                                                                    "run", "engine"))
    assert abs(parts_wall - c["total"].wall_s) <= 0.1 * c["total"].wall_s
    assert prof.unaccounted_rollout_share is not None and prof.unaccounted_rollout_share < 0.1
    assert c["harness"].cpu_s and c["harness"].cpu_s > 0  # the launcher's report of the harness tree
    assert c["proxy"].wall_s and c["proxy"].wall_s < c["harness"].wall_s
    assert prof.harnesses["builtin"].rollouts == prof.n_rollouts
    assert not any("verifier stages" in m for m in prof.missing)
    assert any("prefix-cache counts not reported" in m for m in prof.missing)  # hf reports none
    lines = markdown(prof)
    assert lines[0].startswith("## Cost budget") and any(line.startswith("| trainer update") for line in lines)
    assert any(line.startswith("| verifier: copy-out") for line in lines)
    # the command: plain text off a terminal, and --json
    out = CliRunner().invoke(app, ["profile", str(run_dir)])
    assert out.exit_code == 0, out.output
    assert "per step phase" in out.output and "weight sync" in out.output and "each step" in out.output
    assert "\u2501" not in out.output  # no box drawing in a pipe
    out = CliRunner().invoke(app, ["profile", str(run_dir), "--json"])
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["steps"] == 2 and data["n_rollouts"] == prof.n_rollouts
    assert data["unaccounted"]["rollouts"] == pytest.approx(prof.unaccounted_rollout_share)
    assert [s["step"] for s in data["per_step"]] == [1, 2]


def test_profile_refuses_a_dir_without_a_run(tmp_path):
    deep = tmp_path / ("a-long-directory-name-" * 4) / "run"  # the path is not wrapped, however long
    deep.mkdir(parents=True)
    out = CliRunner().invoke(app, ["profile", str(deep)])
    assert out.exit_code == 2 and f"{deep} holds no run" in out.output


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


def test_a_run_of_older_code_shows_what_it_recorded_and_lists_the_rest():
    from harnessrl.profile.run_profile import add_steps, derive, gaps
    from harnessrl.profile.tables import component_rows, plain_text, profile_json

    prof = RunProfile()
    add_steps(prof, [(0, StepRecord(policy_version=0, time={"eval": 4.0})),
                     (1, StepRecord(policy_version=1, time={"rollout": 3.0, "train": 2.0}))])
    rollouts = [RolloutRecord("r1", "t", "codex", "s1-a1-g0", "ok", 1.0,
                              durations={"sandbox_s": 0.1, "harness_s": 2.0, "verifier_s": 0.4, "total_s": 2.6})]
    add_rollouts(prof, rollouts)
    add_calls(prof, [{"n_prompt": 10, "meta": {"timings": {"render_s": 0.01}}}])
    derive(prof, 0.0)
    prof.missing = gaps(prof, rollouts)
    assert prof.step_wall_s == pytest.approx(9.0) and prof.unaccounted_step_share is None  # no wall_s: phases' sum
    assert prof.components["verifier"].wall_s == pytest.approx(0.4)
    assert prof.unaccounted_rollout_share == pytest.approx(0.1 / 2.6)
    text = "\n".join(prof.missing)
    for what in ("step wall (wall_s) not recorded for 2 of 2", "CPU per phase (cpu) not recorded",
                 "prefix-cache counts not reported", "harness process CPU not recorded for 1",
                 "verifier stages", "the update's parts"):
        assert what in text, what
    assert [r[0] for r in component_rows(prof)][-1] == "rollout total"
    assert "Not recorded by this run:" in markdown(prof) and "not recorded by this run:" in plain_text(prof, "x")
    assert profile_json(prof, "x")["missing"] == prof.missing


def test_verifier_stages_split_its_wall():
    from harnessrl.rollout.task_sandbox import open_task_sandbox
    from harnessrl.sandbox.base import SandboxConfig
    from harnessrl.tasks.model import Task, Verifier
    from harnessrl.tasks.verifier import run_verifier

    task = Task(id="t", instruction="do it", files={"a.txt": b"hi"},
                verifier=Verifier(kind="reward_line", command="test -f a.txt && echo 1.0"))
    with pytest.warns(Warning), open_task_sandbox(task, SandboxConfig(type="local")) as sb:
        res = run_verifier(task, sb)
    assert res.status == "ok" and set(res.stages) == {"copy_out_s", "sandbox_s", "check_s", "teardown_s"}
    assert sum(res.stages[k] for k in ("copy_out_s", "sandbox_s")) <= res.duration_s
