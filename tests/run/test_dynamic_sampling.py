"""Dynamic sampling and the difficulty sampler in the loop, on a tiny model with an in-process
collector whose rewards are set per task: a uniform group is dropped and replaced within the
budget, a step with no informative group trains nothing and says so, and the tracker's state
survives --resume (cut to the resume point)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from rich.console import Console

from harnessrl.engine import SamplingParams, make_tiny_model
from harnessrl.rollout.difficulty import DifficultyTracker, Observation
from harnessrl.run.step_groups import step_plans
from harnessrl.config import load_config
from harnessrl.report.display import RunDisplay
from harnessrl.run.loop import run_training, step_line, train_step
from harnessrl.run.open_run import close_run, open_run
from harnessrl.store.records import PROMPT, CallRecord, RolloutRecord

from .fakes import fake_tasks


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=5)


class ByTaskCollector:
    """Samples one call per rollout from the engine; the reward is `reward(task_id, sample_idx)`."""

    def __init__(self, engine, store, reward):
        self.engine, self.store, self.reward = engine, store, reward
        self.runs: list[list[str]] = []  # the group ids of each collector.run

    def run(self, plans, progress=None):
        self.runs.append([p.group_id for p in plans])
        asyncio.run(self._run(plans))

    async def _one(self, plan, job):
        prompt = list(plan.task.prompt)
        gen = await self.engine.generate(prompt, SamplingParams(temperature=1.0, max_tokens=4))
        rid = job.rollout_id
        self.store.insert_call(CallRecord(
            call_id=f"{rid}-c0", rollout_id=rid, seq=0, protocol="openai.chat", prompt_ids=prompt,
            sampled_ids=list(gen.token_ids), logprobs=list(gen.logprobs), prompt_provenance=[PROMPT] * len(prompt),
            policy_version=gen.policy_version, temperature=1.0, top_p=1.0, finish_reason=gen.finish_reason,
            t_start=time.time(), t_end=time.time()))
        self.store.put_rollout(RolloutRecord(
            rollout_id=rid, task_id=plan.task.id, harness=plan.harness, group_id=plan.group_id, status="ok",
            reward=self.reward(plan.task.id, job.sample_idx), step=plan.step, sample_idx=job.sample_idx,
            split=plan.split, call_count=1))

    async def _run(self, plans):
        await asyncio.gather(*(self._one(p, j) for p in plans for j in p.jobs()))

    def close(self):
        pass


def overrides(tiny_dir, run_dir, *extra):
    return [f"model.path={tiny_dir}", "engine.type=hf", f"output.run_dir={run_dir}", "output.tensorboard=false",
            "loop.steps=1", "loop.groups_per_step=2", "loop.n_per_group=3", "loop.eval_size=0",
            "serve.max_tokens=4", "filters.truncated=keep", "optimizer.lr=1e-3", "algorithm.token_budget=64",
            "algorithm.reward=pass", "harnesses=[{name: builtin, weight: 1}]", *extra]


def one_step(cfg, reward):
    made: list[ByTaskCollector] = []

    def factory(cfg, engine, store, run_dir):
        made.append(ByTaskCollector(engine, store, reward))
        return made[0]

    parts = open_run(cfg, False, Console(quiet=True), factory, fake_tasks)
    try:
        with RunDisplay(Console(quiet=True), 1, 1) as display:
            rec = train_step(parts, 1, display)
        return rec, made[0], parts.tracker
    finally:
        close_run(parts)


def base_tasks(cfg) -> set[str]:
    train, _ = fake_tasks(cfg)
    return {p.task.id for p in step_plans(cfg, 1, train, 1, DifficultyTracker())}


@pytest.mark.parametrize("budget", [2, 1])
def test_a_uniform_group_is_replaced_within_the_budget(tiny_dir, tmp_path, budget):
    cfg = load_config(None, overrides(tiny_dir, tmp_path / "run",
                                      f"loop.dynamic_sampling={{enabled: true, max_extra_groups: {budget}, target_share: 0}}"))
    uniform = base_tasks(cfg)  # the step's own groups all fail; any other task passes 1 time in 3
    rec, collector, tracker = one_step(cfg, lambda task, i: 0.0 if task in uniform else float(i == 0))
    s = rec.sampling
    assert s.groups_sampled == 2 + budget and s.extra_groups == budget
    assert s.dropped_groups == {"all_fail": 2.0}
    assert [d["reason"] for d in s.dropped_log] == ["all_fail", "all_fail"]
    assert {d["task"] for d in s.dropped_log} == uniform
    assert s.informative_groups == pytest.approx(budget / 2)  # the replacements are the informative groups
    assert s.wasted_rollouts == 6 and s.rollouts_sampled == 3 * (2 + budget)
    assert rec.trees.groups_trained == budget
    assert collector.runs == [["s1-a1-g0", "s1-a1-g1"], [f"s1-a1-g{2 + k}" for k in range(budget)]]
    assert [p["group"] for p in s.sampler_picks] == [f"s1-a1-g{k}" for k in range(2 + budget)]
    assert not {p["task"] for p in s.sampler_picks[2:]} & uniform  # replacements avoid the step's tasks
    assert len(tracker.observations) == 2 + budget
    assert "informative groups" in step_line(1, rec) and "all_fail 2" in step_line(1, rec)


def test_a_step_with_no_informative_group_trains_nothing_and_says_so(tiny_dir, tmp_path):
    cfg = load_config(None, overrides(tiny_dir, tmp_path / "run",
                                      "loop.dynamic_sampling={enabled: true, max_extra_groups: 2, target_share: 0}"))
    rec, collector, _ = one_step(cfg, lambda task, i: 1.0)  # every group passes: none has contrast
    assert rec.update is None and rec.trees.groups_trained == 0
    assert rec.sampling.informative_groups == 0 and rec.sampling.dropped_groups == {"all_pass": 4.0}
    assert rec.sampling.groups_sampled == 4  # the budget is spent, then the step gives up
    assert sum(len(r) for r in collector.runs) == 4
    assert "nothing trained: no group had mixed outcomes" in step_line(1, rec)


def test_without_dynamic_sampling_the_step_trains_every_group_and_counts_the_informative(tiny_dir, tmp_path):
    cfg = load_config(None, overrides(tiny_dir, tmp_path / "run"))
    uniform = sorted(base_tasks(cfg))[:1]
    rec, collector, _ = one_step(cfg, lambda task, i: 0.0 if task in uniform else float(i == 0))
    assert len(collector.runs) == 1 and rec.sampling.groups_sampled == 2 and rec.sampling.dropped_groups == {}
    assert rec.sampling.informative_groups == 0.5 and rec.sampling.wasted_rollouts == 3


def test_the_tracker_survives_resume_cut_to_the_resume_point(tiny_dir, tmp_path):
    run_dir = tmp_path / "run"
    reward = lambda task, i: float(i == 0 and task != "t0")  # noqa: E731

    def factory(cfg, engine, store, run_dir):
        return ByTaskCollector(engine, store, reward)

    ov = overrides(tiny_dir, run_dir, "loop.sampler=difficulty")
    run_training(load_config(None, [*ov, "loop.steps=2"]), console=Console(quiet=True),
                 collector_factory=factory, tasks_loader=fake_tasks)
    saved = json.loads((run_dir / "difficulty.json").read_text())["observations"]
    assert sorted({o["step"] for o in saved}) == [1, 2] and len(saved) == 4
    # a crash after step 3's groups were observed, before the step was recorded: the file holds
    # step 3, the store does not
    stale = DifficultyTracker.load(run_dir)
    stale.observe(Observation(3, "t0", "", "builtin", 3, 3))
    stale.save(run_dir)
    cfg = load_config(None, [*ov, "loop.steps=3"])
    parts = open_run(cfg, True, Console(quiet=True), factory, fake_tasks)
    try:
        assert [o.step for o in parts.tracker.observations] == [1, 1, 2, 2]  # step 3 runs again
        assert [vars(o) for o in parts.tracker.observations] == saved
        expected = step_plans(cfg, parts.attempt, parts.train_tasks, 3, DifficultyTracker.load(run_dir, last_step=2,
                                                                                                 cfg=cfg.loop.sampler))
        assert step_plans(cfg, parts.attempt, parts.train_tasks, 3, parts.tracker) == expected
    finally:
        close_run(parts)
    run_training(cfg, resume=True, console=Console(quiet=True), collector_factory=factory, tasks_loader=fake_tasks)
    after = json.loads((run_dir / "difficulty.json").read_text())["observations"]
    assert after[:4] == saved and [o["step"] for o in after[4:]] == [3, 3]
    rows = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1, 2, 3]
    for r in rows[1:]:
        assert {"informative_groups", "wasted_rollouts", "sampler_picks", "pick_pass_rate"} <= set(r)
