"""A change measured over seeds and tasks: the mean and a hierarchical (two-stage) bootstrap interval.

The data are one array per seed: one value per held-out task, e.g. a task's pass rate after training
minus its pass rate in the baseline eval. Seeds are the independent replicates of an experiment
(each trains and evaluates afresh); tasks are a sample of the task distribution within each seed.
The estimate is the mean over seeds of each seed's mean over its tasks (every seed weighs the same).

A bootstrap replicate resamples S seeds with replacement, then, independently for every drawn seed,
that seed's tasks with replacement, and takes the same mean. The percentile interval of the
replicates is the interval. The replicates' variance is (plug-in variances, n_s tasks in seed s):

    Var* = (1/S) * [ mean_s (m_s - m)^2 + mean_s (v_s / n_s) ]

so seeds with equal means reduce it to a task-level bootstrap, and tasks with equal values within a
seed reduce it to a seed-level bootstrap of the seed means (tests/experiment/test_experiment_stats.py).
Numpy only: the core of `harnessrl experiment` (experiment/arms.py) is importable without torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

RESAMPLES = 10_000
PerSeed = Sequence["Sequence[float] | np.ndarray"]  # one array of task values per seed
_CHUNK = 4096  # task resamples drawn at once (bounds the memory)
# a bound this close to 0 is 0: task values are pass-rate differences (multiples of 1/samples), and a
# replicate mean that is 0 in exact arithmetic comes out as a rounding residue such as 2e-18
ZERO_TOLERANCE = 1e-9


def interval_excludes_zero(ci95: tuple[float, float]) -> bool:
    """Whether an interval lies wholly on one side of 0 (a bound within rounding of 0 touches it)."""
    return ci95[0] > ZERO_TOLERANCE or ci95[1] < -ZERO_TOLERANCE


@dataclass(frozen=True)
class SeedInterval:
    mean: float
    ci95: tuple[float, float]  # the percentile interval at `level` (95% unless asked otherwise)
    seeds: int
    tasks: int  # task values over all seeds

    def excludes_zero(self) -> bool:
        return interval_excludes_zero(self.ci95)


def _arrays(per_seed: PerSeed) -> list[np.ndarray]:
    arrays = [np.asarray(v, dtype=np.float64) for v in per_seed]
    if not arrays or any(a.ndim != 1 or a.size == 0 for a in arrays):
        raise ValueError("a hierarchical bootstrap needs at least one seed, each with at least one task value")
    return arrays


def point_estimate(per_seed: PerSeed) -> float:
    """The mean over seeds of each seed's mean over tasks."""
    return float(np.mean([a.mean() for a in _arrays(per_seed)]))


def hierarchical_replicates(per_seed: PerSeed, resamples: int = RESAMPLES,
                            seed: int = 0) -> np.ndarray:
    """`resamples` bootstrap replicates of `point_estimate`: seeds drawn with replacement, then each
    drawn seed's tasks drawn with replacement (independently for each draw of the same seed)."""
    arrays = _arrays(per_seed)
    rng = np.random.default_rng(seed)
    s = len(arrays)
    picked = rng.integers(0, s, size=(resamples, s))  # stage 1: the seeds of each replicate
    slot_means = np.empty((resamples, s))
    for k, a in enumerate(arrays):  # stage 2: a fresh task resample for every slot that drew seed k
        where = np.nonzero(picked == k)
        for lo in range(0, len(where[0]), _CHUNK):
            rows, cols = where[0][lo:lo + _CHUNK], where[1][lo:lo + _CHUNK]
            slot_means[rows, cols] = a[rng.integers(0, a.size, size=(len(rows), a.size))].mean(axis=1)
    return slot_means.mean(axis=1)


def hierarchical_interval(per_seed: PerSeed, level: float = 0.95,
                          resamples: int = RESAMPLES, seed: int = 0) -> SeedInterval:
    """The point estimate with its percentile interval (deterministic for a given `seed`)."""
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    arrays = _arrays(per_seed)
    reps = hierarchical_replicates(arrays, resamples, seed)
    tail = (1 - level) / 2
    lo, hi = np.quantile(reps, [tail, 1 - tail])
    return SeedInterval(mean=point_estimate(arrays), ci95=(float(lo), float(hi)), seeds=len(arrays),
                        tasks=int(sum(a.size for a in arrays)))


def replicate_variance(per_seed: PerSeed) -> float:
    """The exact variance of the bootstrap replicates (the formula of the module docstring)."""
    arrays = _arrays(per_seed)
    means = np.array([a.mean() for a in arrays])
    within = np.array([a.var() / a.size for a in arrays])
    return float((means.var() + within.mean()) / len(arrays))
