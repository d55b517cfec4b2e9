"""`loop.sampler.family_weights`: a step's planned groups come from each family in proportion to
its weight, whatever its number of tasks; within a family the sampler's own weights still decide;
a weight that names no family of the train split, or leaves none above 0, is refused at the start."""

from __future__ import annotations

from collections import Counter

import pytest
from harnessrl.config import ConfigError, load_config
from harnessrl.rollout.difficulty import DifficultyTracker, task_family
from harnessrl.rollout.plan import family_balanced, plan_step, weight_group
from harnessrl.run.errors import TrainError
from harnessrl.run.step_groups import pick_log, step_plans, task_weight
from harnessrl.run.task_sets import check_family_weights
from harnessrl.tasks.model import Task, Verifier

VERIFIER = Verifier("checks", "true")


def _tasks(counts: dict[str, int]) -> list[Task]:
    return [Task(id=f"{fam}-{i}", instruction="x", files={}, verifier=VERIFIER, family=fam)
            for fam, n in counts.items() for i in range(n)]


def test_each_familys_tasks_together_weigh_its_weight_for_every_harness():
    tasks = _tasks({"big": 12, "small": 2, "mid": 4})
    base = {t.id: 0.05 + (i % 5) / 10 for i, t in enumerate(tasks)}  # the sampler's own, uneven weights
    w = family_balanced(lambda t, h: base[t.id] * (2 if h == "b" else 1), tasks, {"small": 3.0}, task_family)
    for h in ("a", "b"):
        totals = Counter()
        for t in tasks:
            totals[t.family] += w(t, h)
        assert totals == pytest.approx({"big": 1.0, "small": 3.0, "mid": 1.0})
    # within a family the sampler's ratios stay
    big = [t for t in tasks if t.family == "big"]
    assert w(big[0], "a") / w(big[1], "a") == pytest.approx(base[big[0].id] / base[big[1].id])


def test_planned_groups_follow_the_family_weights_not_the_task_counts():
    tasks = _tasks({"big": 30, "small": 3})
    w = family_balanced(lambda t, h: 1.0, tasks, {"small": 3.0}, task_family)
    picks = Counter(p.task.family for step in range(300)
                    for p in plan_step(step, 1, tasks, {"h": 1.0}, 1, 4, seed=0, task_weight=w))
    assert 0.68 < picks["small"] / 300 < 0.82  # 3 / (3 + 1); by task count it would be 3 / 33
    unweighted = Counter(p.task.family for step in range(300) for p in plan_step(step, 1, tasks, {"h": 1.0}, 1, 4, 0))
    assert unweighted["small"] / 300 < 0.2


def test_the_run_config_reaches_the_steps_plans():
    tasks = _tasks({"big": 20, "small": 2})
    on = load_config(None, ["loop.groups_per_step=1", "loop.sampler.type=uniform",
                            "loop.sampler.family_weights={small: 1.0, big: 0.0}"])
    assert all(p.task.family == "small" for s in range(20)
               for p in step_plans(on, 1, tasks, s, DifficultyTracker(cfg=on.loop.sampler)))
    diff = load_config(None, ["loop.groups_per_step=1", "loop.sampler.type=difficulty",
                              "loop.sampler.family_weights={small: 0.0}"])
    assert all(p.task.family == "big" for s in range(20)
               for p in step_plans(diff, 1, tasks, s, DifficultyTracker(cfg=diff.loop.sampler)))


def test_bad_family_weights_are_refused_with_the_fix():
    tasks = _tasks({"big": 2, "small": 2})
    with pytest.raises(ConfigError, match="family weights must be >= 0"):
        load_config(None, ["loop.sampler.family_weights={small: -1}"])
    with pytest.raises(TrainError, match=r"\['tiny'\].*its families and categories: \['big', 'general', 'small'\]"):
        check_family_weights(tasks, {"tiny": 1.0})
    with pytest.raises(TrainError, match="weight 0"):
        check_family_weights(tasks, {"big": 0.0, "small": 0.0})
    check_family_weights(tasks, {"small": 0.0})  # big keeps its default 1
    check_family_weights(tasks, {})


def test_a_weight_may_name_a_category_that_spans_families():
    tasks = _tasks({"job_a": 4, "job_b": 4}) + [
        Task(id=f"look-{k}-{i}", instruction="x", files={}, verifier=VERIFIER, family=f"lookup_{k}", category="lookup")
        for k in ("rm", "cp", "echo") for i in range(3)]
    group = weight_group({"lookup": 2.0})
    w = family_balanced(lambda t, h: 1.0, tasks, {"lookup": 2.0}, group)
    totals = Counter()
    for t in tasks:
        totals[group(t)] += w(t, "h")
    assert totals == pytest.approx({"job_a": 1.0, "job_b": 1.0, "lookup": 2.0})  # lookup: half, not 9 / 17
    check_family_weights(tasks, {"lookup": 2.0})
    with pytest.raises(TrainError, match="weight 0"):
        check_family_weights(tasks, {"lookup": 0.0, "job_a": 0.0, "job_b": 0.0})


def test_the_pick_log_records_the_weight_the_draw_used():
    tasks = _tasks({"big": 20, "small": 2})
    cfg = load_config(None, ["loop.groups_per_step=2", "loop.sampler.type=uniform",
                             "loop.sampler.family_weights={small: 3.0}"])
    tracker = DifficultyTracker(cfg=cfg.loop.sampler)
    plans = step_plans(cfg, 1, tasks, 1, tracker)
    drawn_by = task_weight(cfg, tracker, 1, tasks)
    logged = pick_log(plans, tracker, 1, drawn_by)
    # uniform inside a family, each family's tasks together weigh its weight: 3/2 and 1/20
    want = {"small": 1.5, "big": 0.05}
    assert [row["weight"] for row in logged] == [want[p.task.family] for p in plans]
    # without the draw's weight the log falls back to the tracker's own (1 for the uniform sampler)
    assert [row["weight"] for row in pick_log(plans, tracker, 1)] == [1.0] * len(plans)
