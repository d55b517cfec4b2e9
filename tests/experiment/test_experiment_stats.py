"""experiment/seed_bootstrap.py against cases whose answer is known: one seed is the task-level bootstrap;
seeds with equal task values (no variance between seeds) are the task bootstrap with S x n draws;
seeds with constant tasks (no variance within a seed) are the bootstrap of the seed means; in
general the replicates' variance is the two-stage formula."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from harnessrl.rollout.pass_at_k import bootstrap_interval
from harnessrl.experiment.seed_bootstrap import (SeedInterval, hierarchical_interval, hierarchical_replicates,
                                          point_estimate, replicate_variance)


def test_one_seed_is_the_task_level_bootstrap():
    tasks = [1.0, 0.0, 0.5, 1.0, 0.0, 0.0, 1.0, 0.5, 0.0, 1.0, 0.5, 0.0]
    ours = hierarchical_interval([tasks], resamples=20_000, seed=1)
    theirs = bootstrap_interval(tasks, resamples=20_000, seed=1)  # what the per-run change tables use
    assert ours.mean == pytest.approx(np.mean(tasks))
    assert ours.ci95 == pytest.approx(theirs, abs=0.03)  # two RNGs, the same distribution
    assert ours.seeds == 1 and ours.tasks == len(tasks)


def test_seeds_without_variance_between_them_reduce_to_the_task_bootstrap_over_all_draws():
    tasks = np.array([0.0, 1.0, 1.0, -1.0, 0.0, 0.5, 0.0, -0.5])
    s = 4
    reps = hierarchical_replicates([tasks] * s, resamples=40_000, seed=2)
    # every replicate is the mean of s * n draws from the n task values
    assert reps.var() == pytest.approx(tasks.var() / (len(tasks) * s), rel=0.03)
    assert replicate_variance([tasks] * s) == pytest.approx(tasks.var() / (len(tasks) * s))
    flat = np.random.default_rng(3).choice(tasks, size=(40_000, s * len(tasks))).mean(axis=1)
    assert np.quantile(reps, [0.025, 0.975]) == pytest.approx(np.quantile(flat, [0.025, 0.975]), abs=0.03)


def test_seeds_without_variance_within_them_reduce_to_the_bootstrap_of_seed_means():
    means = [0.1, 0.3, -0.2]
    per_seed = [[m] * 5 for m in means]
    reps = hierarchical_replicates(per_seed, resamples=20_000, seed=4)
    possible = {round(float(np.mean(c)), 9) for c in itertools.product(means, repeat=3)}
    assert {round(float(r), 9) for r in reps} <= possible  # only seeds are resampled
    assert reps.var() == pytest.approx(np.var(means) / 3, rel=0.05)
    lo, hi = hierarchical_interval(per_seed, seed=4).ci95
    assert lo >= min(means) - 1e-12 and hi <= max(means) + 1e-12


def test_general_case_matches_the_two_stage_variance_and_is_deterministic():
    rng = np.random.default_rng(5)
    per_seed = [rng.normal(m, 0.4, size=n) for m, n in ((0.2, 12), (0.05, 16), (0.3, 9), (0.1, 12))]
    reps = hierarchical_replicates(per_seed, resamples=40_000, seed=6)
    assert reps.var() == pytest.approx(replicate_variance(per_seed), rel=0.04)
    assert reps.mean() == pytest.approx(point_estimate(per_seed), abs=0.005)
    assert hierarchical_interval(per_seed, seed=7) == hierarchical_interval(per_seed, seed=7)
    iv = hierarchical_interval(per_seed, seed=7)
    assert iv.ci95[0] < iv.mean < iv.ci95[1] and iv.seeds == 4 and iv.tasks == 49


def test_a_seed_without_tasks_is_refused():
    with pytest.raises(ValueError, match="at least one"):
        hierarchical_interval([[0.1], []])
    with pytest.raises(ValueError, match="at least one"):
        hierarchical_interval([])
    with pytest.raises(ValueError, match="level"):
        hierarchical_interval([[0.1]], level=1.5)


def test_a_bound_at_a_rounding_residue_of_zero_does_not_exclude_zero():
    # the grpo_arms run: coldstart vs grpo came out [2.3e-18, +0.236], an interval that touches 0
    touching = SeedInterval(mean=0.118, ci95=(2.255e-18, 0.236), seeds=3, tasks=48)
    assert not touching.excludes_zero()
    assert not SeedInterval(mean=-0.1, ci95=(-0.2, -1e-17), seeds=3, tasks=48).excludes_zero()
    assert SeedInterval(mean=0.1, ci95=(0.0208, 0.2), seeds=3, tasks=48).excludes_zero()
    assert SeedInterval(mean=-0.1, ci95=(-0.2, -0.0208), seeds=3, tasks=48).excludes_zero()
    # pass-rate differences in thirds: this set's lower bound is 0 in exact arithmetic and 6.9e-18 in floats
    per_seed = [np.array(v) / 3 for v in ([0, 2, 1, 0, 2, 2], [-1, 2, 1, 1, 1, -1], [1, 1, 0, -1, -1, 2])]
    interval = hierarchical_interval(per_seed, resamples=2000)
    assert 0 < interval.ci95[0] < 1e-12
    assert not interval.excludes_zero()


def test_the_training_table_shows_the_branch_points_and_their_mixed_share_of_a_branching_arm_only():
    from harnessrl.experiment.results import run_training, training_markdown
    tree = run_training([(0, {"informative_groups": 0.0}),  # the baseline eval step is left out
                         (1, {"informative_groups": 0.5, "branch_points": 4, "branch_mixed": 0.25}),
                         (2, {"informative_groups": 1.0, "branch_points": 2, "branch_mixed": 0.5})])
    flat = run_training([(1, {"informative_groups": 1.0}), (2, {"informative_groups": 0.5})])
    assert tree["branch_mixed"] == pytest.approx(0.375) and tree["branch_points"] == pytest.approx(3.0)
    assert "branch_mixed" not in flat and flat["informative_groups"] == pytest.approx(0.75)
    lines = training_markdown({"tree": {0: tree}, "flat": {0: flat}})
    header = next(line for line in lines if line.startswith("| arm"))
    col = header.split(" | ").index("branch points with mixed outcomes")
    row = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in lines if line.startswith(("| tree", "| flat"))}
    assert row["tree"][col] == "38%" and row["flat"][col] == "-"
