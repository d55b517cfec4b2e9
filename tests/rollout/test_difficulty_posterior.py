"""The difficulty sampler's posterior (rollout/difficulty.py) and the step's top-up (run/step_groups.py),
without an engine: P(mixed) under a Beta posterior on hand-made cases, a Brier score below a
constant's on simulated polarised groups (where the old point estimate scores above it), eval
groups that count only once their plans could have seen them, and a step whose picks all come
back uniform topping up from the task most likely mixed."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from harnessrl.rollout.branching import BranchingConfig
from harnessrl.rollout.difficulty import (DEFAULT_DISPERSION, DifficultyTracker, Observation, SamplerConfig,
                                          beta_moment, brier, fit_concentration, p_mixed, point_p_mixed)
from harnessrl.rollout.informative import DynamicSamplingConfig
from harnessrl.rollout.plan import GroupPlan
from harnessrl.run.step_groups import collect_groups
from harnessrl.store import RunStore
from harnessrl.store.records import RolloutRecord
from tests.support.tasks import PassTask as Task




def test_p_mixed_under_a_beta_posterior_on_hand_made_cases():
    assert beta_moment(1, 1, 6) == pytest.approx(1 / 7)  # E[p^6], p uniform
    assert p_mixed(1, 1, 6) == pytest.approx(1 - 2 / 7)
    a, b = 2.0, 3.0  # n = 2: 1 - E[p^2] - E[(1-p)^2]
    assert p_mixed(a, b, 2) == pytest.approx(1 - a * (a + 1) / 30 - b * (b + 1) / 30)
    assert p_mixed(5, 5, 1) == 0.0  # one rollout never has contrast
    assert p_mixed(5e5, 5e5, 6) == pytest.approx(point_p_mixed(0.5, 6), abs=1e-4)  # a known p: the point formula
    assert p_mixed(0.1, 0.1, 6) < 0.25 < point_p_mixed(0.5, 6)  # polarised: the mean says 0.5, a mix is rare
    cfg = SamplerConfig(type="difficulty", prior=2.0, concentration=2.0, decay=1.0)
    t = DifficultyTracker([Observation(1, "a", "f", "h", 2, 4)], cfg)
    f = (2 * 0.5 + 2) / (2 + 4)
    assert t.posterior("a", "f", "h", at=2) == pytest.approx((2 * f + 2, 2 * (1 - f) + 2))
    assert t.posterior_p_mixed("a", "f", "h", 2, 4) == pytest.approx(p_mixed(2 * f + 2, 2 * (1 - f) + 2, 4))
    # the sampler's: the next group's rate Beta(k mu, k (1 - mu)) around the posterior mean, k = 2
    # before two groups could fit it
    mu = (2 * f + 2) / (2 + 4)
    assert t.dispersion("h", 2) == DEFAULT_DISPERSION == 2.0
    assert t.p_mixed("a", "f", "h", 2, 4) == pytest.approx(p_mixed(2 * mu, 2 * (1 - mu), 4))
    sharp = DifficultyTracker(t.observations, cfg.model_copy(update={"sharpness": 2.0, "floor": 0.0}))
    assert sharp.weight("a", "f", "h", 2, 4) == pytest.approx(t.p_mixed("a", "f", "h", 2, 4) ** 2)


def test_the_fitted_concentration_follows_how_polarised_the_tasks_are():
    rng = random.Random(0)

    def rows(c):
        out = []
        for _ in range(40):
            p = rng.betavariate(c * 0.5, c * 0.5)
            out.append((0.5, float(sum(rng.random() < p for _ in range(6))), 6.0))
        return out

    assert fit_concentration(rows(0.3)) < 1.0 < 4.0 < fit_concentration(rows(20.0))
    assert fit_concentration([(0.5, 1.0, 1.0)] * 5) == 1.0  # single rollouts say nothing: the default


def simulated_groups(seed: int, steps: int = 8, tasks: int = 6, n: int = 6) -> list[Observation]:
    """Groups of polarised tasks (p ~ Beta(0.3, 0.3) around a family mean), 4 per step, tasks
    revisited."""
    rng = random.Random(seed)
    p = {(f, i): rng.betavariate(0.6 * m, 0.6 * (1 - m)) for f, m in (("x", 0.3), ("y", 0.7)) for i in range(tasks)}
    out = []
    for step in range(1, steps + 1):
        for f, i in rng.sample(sorted(p), 4):
            out.append(Observation(step, f"{f}{i}", f, "h", sum(rng.random() < p[(f, i)] for _ in range(n)), n))
    return out


def test_the_estimate_predicts_a_mixed_group_better_than_a_constant_and_the_point_estimate_does_not():
    new_pairs, old_pairs, outcomes = [], [], []
    for seed in range(12):
        obs = simulated_groups(seed)
        new = DifficultyTracker(obs, SamplerConfig(type="difficulty"))
        old = DifficultyTracker(obs, SamplerConfig(type="difficulty", concentration=2.0))
        for o in obs:
            y = 0 < o.passes < o.n
            new_pairs.append((new.until(o.step - 1).p_mixed(o.task, o.family, o.harness, o.step, o.n), y))
            old_pairs.append((point_p_mixed(old.until(o.step - 1).pass_rate(o.task, o.family, o.harness, o.step),
                                            o.n), y))
            outcomes.append(y)
    share = sum(outcomes) / len(outcomes)
    constant = brier((share, y) for y in outcomes)
    assert brier(new_pairs) < constant < brier(old_pairs)


def test_an_eval_group_counts_once_the_plans_it_could_reach_are_drawn():
    obs = [Observation(0, "e0", "f", "h", 3, 3, split="eval"), Observation(2, "e1", "f", "h", 0, 3, split="eval"),
           Observation(2, "t0", "f", "h", 1, 3)]
    lagged = DifficultyTracker(obs, eval_delay=1)  # rollouts run ahead: step 3 was planned before step 2's eval
    assert [o.task for o in lagged.until(2).observations] == ["e0", "t0"]  # the baseline's counts at once
    assert [o.task for o in lagged.until(3).observations] == ["e0", "e1", "t0"]
    assert [o.task for o in DifficultyTracker(obs).until(2).observations] == ["e0", "e1", "t0"]
    assert DifficultyTracker(obs).borrowable("e0", "h", before=5) is None  # eval groups lend no prefix
    t = DifficultyTracker(obs)
    t.forget_eval(2)  # an eval that runs again replaces its groups
    assert [o.task for o in t.observations] == ["e0", "t0"]


def test_a_step_whose_picks_all_come_back_uniform_tops_up_from_the_task_most_likely_mixed(tmp_path):
    tasks = [Task(f"t{i}") for i in range(5)]
    mixed_task = "t4"  # passes 1 time in 3; every other task always passes
    loop = SimpleNamespace(groups_per_step=2, n_per_group=3, seed=0, max_policy_lag=0,
                           dynamic_sampling=DynamicSamplingConfig(enabled=True, max_extra_groups=0, rescue_groups=2,
                                                                  target_share=0.0),
                           branching=BranchingConfig(), sampler=SamplerConfig(type="difficulty"))
    cfg = SimpleNamespace(loop=loop, algorithm=SimpleNamespace(reward="pass"), harnesses=[SimpleNamespace(name="h", weight=1.0)])
    # what earlier steps saw: t4 mixed, t2 and t3 always passing
    tracker = DifficultyTracker([Observation(1, "t4", "fam", "h", 1, 3), Observation(1, "t2", "fam", "h", 3, 3),
                                 Observation(1, "t3", "fam", "h", 3, 3)], loop.sampler)
    store = RunStore(tmp_path / "run")
    waves: list[list[str]] = []

    def run(plans, key="rollout"):
        waves.append([p.task.id for p in plans])
        for p in plans:
            for j in p.jobs():
                reward = float(j.sample_idx == 0) if p.task.id == mixed_task else 1.0
                store.put_rollout(RolloutRecord(rollout_id=j.rollout_id, task_id=p.task.id, harness=p.harness,
                                                group_id=p.group_id, status="ok", reward=reward, step=2,
                                                sample_idx=j.sample_idx, split="train", call_count=1))

    plans = [GroupPlan(f"s2-a1-g{i}", tasks[i], "h", 3, "train", 2) for i in range(2)]  # t0, t1: both all-pass
    run(plans)
    try:
        got = collect_groups(cfg, store, tracker, 1, tasks, plans, run)
    finally:
        store.close()
    assert waves[1][0] == mixed_task  # the rescue wave starts with the task most likely mixed
    assert [g.plan.task.id for g in got.groups] == [mixed_task]  # the step trains something
    s = got.stats
    assert s.rescue_groups == len(waves[1]) and s.informative_groups == 0.5
    assert s.dropped_groups["all_pass"] >= 2
    picks = {p["task"]: p for p in s.sampler_picks}
    assert picks[mixed_task]["mixed"] is True and picks["t0"]["mixed"] is False
    assert picks[mixed_task]["p_mixed"] > picks["t0"]["p_mixed"]
