"""The top-up of loop.dynamic_sampling (rollout/informative.py, run/step_groups.py), without an
engine: a step whose groups mostly come back uniform keeps drawing groups on the tasks most likely
mixed until target_share of its batch is informative, or until its rollout cap; a step never trains
nothing while a task with mixed outcomes is left in the training set; the rollouts beyond the
step's own are counted in its record and its line."""

from __future__ import annotations

import random
from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from harnessrl.rollout.branching import BranchingConfig
from harnessrl.rollout.difficulty import DifficultyTracker, Observation, SamplerConfig
from harnessrl.rollout.informative import DynamicSamplingConfig, step_rollout_cap, topup_target
from harnessrl.rollout.plan import GroupPlan
from harnessrl.run.step_groups import Collected, collect_groups, sampling_text
from harnessrl.store import RunStore
from harnessrl.store.records import RolloutRecord


@dataclass(frozen=True)
class Task:
    id: str
    family: str = "fam"

    def passed(self, reward):
        return reward is not None and reward > 0


def one_step(tmp_path, tasks, mixed, ds, history=(), groups_per_step=4, n=3, sampler="difficulty"):
    """Collect step 2 of fake groups: a task in `mixed` passes its first sample only, every other
    task passes always. Returns (what was collected, the tasks of each wave)."""
    loop = SimpleNamespace(groups_per_step=groups_per_step, n_per_group=n, seed=0, max_policy_lag=0,
                           dynamic_sampling=ds, branching=BranchingConfig(), sampler=SamplerConfig(type=sampler))
    cfg = SimpleNamespace(loop=loop, algorithm=SimpleNamespace(reward="pass"),
                          harnesses=[SimpleNamespace(name="h", weight=1.0)])
    tracker = DifficultyTracker(list(history), loop.sampler)
    store = RunStore(tmp_path / "run")
    waves: list[list[str]] = []

    def run(plans, key="rollout"):
        waves.append([p.task.id for p in plans])
        for p in plans:
            for j in p.jobs():
                reward = float(j.sample_idx == 0) if p.task.id in mixed else 1.0
                store.put_rollout(RolloutRecord(rollout_id=j.rollout_id, task_id=p.task.id, harness=p.harness,
                                                group_id=p.group_id, status="ok", reward=reward, step=2,
                                                sample_idx=j.sample_idx, split="train", call_count=1))

    plans = [GroupPlan(f"s2-a1-g{i}", tasks[i], "h", n, "train", 2) for i in range(groups_per_step)]
    run(plans)
    try:
        got: Collected = collect_groups(cfg, store, tracker, 1, tasks, plans, run)
    finally:
        store.close()
    return got, waves


def test_the_defaults_top_up_to_80_percent_within_three_times_the_step_s_rollouts():
    ds = DynamicSamplingConfig()
    assert ds.target_share == 0.8 and ds.rollout_cap == 3.0
    assert topup_target(0.8, 4) == 4 and topup_target(0.8, 8) == 7 and topup_target(0.5, 4) == 2
    assert topup_target(0.0, 4) == 0
    assert step_rollout_cap(3.0, 4, 6) == 72 and step_rollout_cap(1.5, 4, 6) == 36
    with pytest.raises(ValueError):
        DynamicSamplingConfig(rollout_cap=0.5)


def test_a_step_of_mostly_uniform_groups_keeps_drawing_until_the_target_share(tmp_path):
    tasks = [Task(f"t{i}") for i in range(16)]
    mixed = {"t9", "t11", "t13", "t15"}  # 4 of 16 tasks have contrast; the step's own 4 picks have none
    ds = DynamicSamplingConfig(enabled=True, max_extra_groups=2, target_share=0.8, rollout_cap=4.0, rescue_groups=0)
    got, waves = one_step(tmp_path, tasks, mixed, ds)
    s = got.stats
    assert s.informative_groups == 1.0  # ceil(0.8 x 4) = 4 informative groups: the whole batch
    assert {g.plan.task.id for g in got.groups} == mixed
    assert len(waves) > 2  # beyond the one round of replacements the budget allowed
    assert s.topup_groups == s.groups_sampled - 4 - 2 > 0
    assert s.groups_sampled * 3 <= step_rollout_cap(4.0, 4, 3)
    # the record counts every fresh rollout beyond the step's own 4 groups of 3
    assert s.extra_rollouts == 3 * (s.groups_sampled - 4) == s.rollouts_sampled - 12
    assert len({p["task"] for p in s.sampler_picks}) == len(s.sampler_picks)  # no task twice in a step
    line = sampling_text(s, float(len(got.groups)))
    assert f"{s.topup_groups:.0f} top-up groups" in line and f"{s.extra_rollouts:.0f} extra rollouts" in line


def test_the_top_up_stops_at_the_rollout_cap(tmp_path):
    tasks = [Task(f"t{i}") for i in range(20)]
    ds = DynamicSamplingConfig(enabled=True, max_extra_groups=2, target_share=1.0, rollout_cap=2.0, rescue_groups=0)
    got, waves = one_step(tmp_path, tasks, set(), ds)  # nothing has contrast: only the cap stops it
    s = got.stats
    assert s.groups_sampled == 8 and s.rollouts_sampled == step_rollout_cap(2.0, 4, 3) == 24
    assert s.topup_groups == 2 and s.extra_groups == 4 and s.extra_rollouts == 12
    assert s.informative_groups == 0 and got.groups == []
    assert "nothing trained" in sampling_text(s, 0.0)


def test_without_the_top_up_the_step_stops_at_the_budget(tmp_path):
    tasks = [Task(f"t{i}") for i in range(16)]
    ds = DynamicSamplingConfig(enabled=True, max_extra_groups=2, target_share=0.0, rescue_groups=0)
    got, waves = one_step(tmp_path, tasks, {"t9", "t11", "t13", "t15"}, ds)
    assert got.stats.groups_sampled == 6 and got.stats.topup_groups == 0 and got.stats.extra_rollouts == 6


def test_a_step_without_dynamic_sampling_counts_no_extra_rollouts(tmp_path):
    tasks = [Task(f"t{i}") for i in range(8)]
    got, waves = one_step(tmp_path, tasks, {"t1"}, DynamicSamplingConfig(), sampler="uniform")
    assert len(waves) == 1 and got.stats.extra_rollouts == 0 and got.stats.topup_groups is None
    assert len(got.groups) == 4  # every group trains, as before


@pytest.mark.parametrize("seed", range(12))
def test_a_step_never_trains_nothing_while_a_task_with_mixed_outcomes_remains(tmp_path, seed):
    """Random worlds of 16 tasks, 1-2 of them mixed (never among the step's own picks), earlier steps
    having seen some of the others pass every time: under the defaults (target 0.8, cap 3x, rescue 2)
    the step finds a mixed task and trains it."""
    rng = random.Random(seed)
    tasks = [Task(f"t{i}") for i in range(16)]
    mixed = set(rng.sample([t.id for t in tasks[4:]], rng.choice([1, 2])))
    history = [Observation(1, t.id, t.family, "h", 3, 3) for t in tasks if t.id not in mixed and rng.random() < 0.5]
    got, waves = one_step(tmp_path, tasks, mixed, DynamicSamplingConfig(enabled=True, max_extra_groups=2),
                          history=history)
    assert got.groups and {g.plan.task.id for g in got.groups} <= mixed
    assert got.stats.rollouts_sampled <= step_rollout_cap(3.0, 4, 3) + 3 * 2  # the cap, then at most 2 rescues
