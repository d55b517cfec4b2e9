"""Which training tasks to sample: a pass-rate posterior per task and harness, shrunk to its
family, and the chance it gives of a group with mixed outcomes (`loop.sampler`).

A group whose rollouts all pass or all fail gives GRPO no signal. The `difficulty` sampler draws a
task for a harness with weight max(P(mixed), floor), P(mixed) the chance that a group of n fresh
rollouts has both a pass and a fail; the floor keeps every task in reach (a task at p = 0 today may
pass after a few updates; the estimate only moves if the task is sampled again).

Pass rates are polarised per task: within one family most tasks pass nearly always or nearly
never. And a task's rate moves between groups: the policy is trained on the task a group ran, so a
mixed group is often followed by an all-pass one. So a task's rate is a distribution, not a number
(empirical Bayes, Beta-binomial), and the next group's own rate is another draw around it:

    family rate  f = (prior * 0.5 + sum_w passes over the family) / (prior + sum_w n over the family)
    task prior   p ~ Beta(m f, m (1 - f))      m: `concentration`, or fitted per harness (below)
    posterior    p ~ Beta(m f + sum_w passes of the task, m (1 - f) + sum_w fails of the task)
    task mean    mu = the posterior's mean (the pick's `p`)
    next group   q ~ Beta(k mu, k (1 - mu))    k: `dispersion`, or fitted per harness (below)
    P(mixed | n) = 1 - E[q^n] - E[(1 - q)^n],  E[q^n] = prod_{i<n} (k mu + i) / (k + i)

with each group's counts weighted by decay ** (steps since it ran): the policy changes, so an old
group says less about today's pass rate. The pseudo-count m is how alike a family's tasks are (how
far a task's own groups move its mean); k is how far one group's rate lands from its task's mean.
Both are fitted per harness on the run's groups (training and eval), maximising a Beta-binomial
marginal likelihood with a weak log-normal prior (around 1 for m, 2 for k) over a grid
(`fit_concentration`): m on each group against its family rate, k on each group against its task's
mean without that group (leave one out). Before two groups of two rollouts ran: m = 1, k = 2.

Why k and not the posterior itself (P(mixed) = 1 - E[p^n] - E[(1 - p)^n] under Beta(a, b),
`posterior_p_mixed`): the posterior grows surer with every group, so a task seen mixed once got
P(mixed) ~ 0.9, and the sampler's replacements and top-ups went back to it. In the two recorded
runs those repeats came back mixed 57% of the time (28 picks; the posterior said 0.84 on
average), unseen tasks 67% (48). Replayed at the runs' 76 picks (benchmarks/difficulty_replay.py,
docs/benchmarks.md), Brier: the posterior 0.262, this estimate 0.231, each run's own mixed share as
a constant (known only once the run ended) 0.226, the mixed share of the steps before 0.252. It
beats the posterior and the causal constant, and ties the hindsight one (+0.005 [-0.036, +0.043]).

Observed: each group's fresh samples (a branch's outcome depends on the prefix it replayed,
rollout/branching.py), and every held-out eval group (`split="eval"`: its tasks are other tasks of
the same families, so they inform the family rates and m). An eval of step s runs after the plans
of the steps up to s + max_policy_lag were drawn (asynchronous rollouts), so a tracker with
`eval_delay` 1 lets an eval group count from `until(s + 1)` on (the baseline's, step 0, at once).

The tracker is a list of observations (step, task, family, harness, passes, n, a passing rollout,
split, group) kept in <run_dir>/difficulty.json, written after every step's groups ran. A resumed
run keeps the observations of the steps it keeps (`load(last_step=...)`), so the estimate at a
step is the same whether or not the run was interrupted. A step is planned from the observations
of the steps before it that had ended when its rollouts could start (`planned_from`), so planning
it twice gives the same groups.

The observations also remember, per task and harness, the latest passing fresh rollout: the
prefix a branch of an all-fail group may replay (`BranchingConfig.borrow`).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

FILE_NAME = "difficulty.json"
# the pseudo-counts m a fit chooses from (geometric, 0.25 .. 64), and m before there is data to fit:
# Beta(0.5, 0.5) at a family rate of 0.5, polarised as the demo's tasks are (docs/benchmarks.md)
CONCENTRATION_GRID = tuple(round(0.25 * 2 ** (k / 2), 4) for k in range(17))
DEFAULT_CONCENTRATION = 1.0
# k before there is data to fit: a group's rate Beta(1, 1) around a task mean of 0.5
DEFAULT_DISPERSION = 2.0


class SamplerConfig(BaseModel):
    """`loop.sampler` of a run config: `uniform` (every task alike) or `difficulty` (weight
    max(P(mixed), floor) from the tracker's estimate). `loop.sampler: difficulty` is short for
    `{type: difficulty}`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["uniform", "difficulty"] = "uniform"
    floor: float = Field(0.05, ge=0.0, le=0.25)  # the least weight a task gets (a P(mixed))
    prior: float = Field(2.0, gt=0)  # pseudo-rollouts at 0.5 of a family's rate
    # pseudo-rollouts of the family rate in a task's prior; null: fitted per harness (empirical Bayes)
    concentration: float | None = Field(None, gt=0)
    # pseudo-rollouts of a group's own pass rate around its task's mean (small: the next group of a
    # task may land far from its past ones); null: fitted per harness (empirical Bayes)
    dispersion: float | None = Field(None, gt=0)
    decay: float = Field(0.7, gt=0, le=1)  # weight of a group per step of age
    # weight = max(P(mixed) ** sharpness, floor): above 1, the picks lean harder on the tasks most
    # likely mixed (fewer distinct tasks trained; benchmarks/sampler_calibration.py --simulate)
    sharpness: float = Field(1.0, ge=1.0, le=16.0)
    # {family or category: weight}: the step's planned groups come from each family (or named
    # category, e.g. `lookup` for its three families) in proportion to its weight (1 when not listed),
    # whatever its number of tasks; within one, by the sampler's weights.
    # Empty: every task alike, so a family's share is its share of the tasks (rollout/plan.py)
    family_weights: dict[str, float] = {}

    @field_validator("family_weights")
    @classmethod
    def _non_negative(cls, v: dict[str, float]) -> dict[str, float]:
        bad = {f: w for f, w in v.items() if w < 0}
        if bad:
            raise ValueError(f"family weights must be >= 0, got {bad}")
        return v

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, data: Any) -> Any:
        return {"type": data} if isinstance(data, str) else data


@dataclass(frozen=True)
class Observation:
    """The fresh (non-branch) rollouts of one group: how many were scored and how many passed."""

    step: int
    task: str
    family: str
    harness: str
    passes: int
    n: int
    passing: str = ""  # the id of a passing fresh rollout of the group ("" when none passed)
    split: str = "train"  # "eval": a held-out eval group (never borrowed from, never a pick)
    group: str = ""  # the group's id


@dataclass(frozen=True)
class Borrowable:
    """A recorded passing rollout of a task and harness (the prefix an all-fail group may replay)."""

    rollout_id: str
    step: int


def beta_moment(a: float, b: float, n: int) -> float:
    """E[p^n] for p ~ Beta(a, b)."""
    out = 1.0
    for i in range(n):
        out *= (a + i) / (a + b + i)
    return out


def p_mixed(a: float, b: float, n: int) -> float:
    """The chance that n rollouts with a pass rate p ~ Beta(a, b) both pass and fail."""
    if n < 2:
        return 0.0
    return max(1.0 - beta_moment(a, b, n) - beta_moment(b, a, n), 0.0)


def point_p_mixed(p: float, n: int) -> float:
    """The same chance for a pass rate known to be exactly p."""
    return max(1.0 - p ** n - (1.0 - p) ** n, 0.0) if n >= 2 else 0.0


def _log_marginal(m: float, rows: Sequence[tuple[float, float, float]]) -> float:
    """Beta-binomial log likelihood (less the binomial coefficients) of (f, passes, n) rows under
    prior Beta(m f, m (1 - f)); counts may be fractional (decayed)."""
    total = 0.0
    for f, k, n in rows:
        a, b = m * f, m * (1.0 - f)
        total += (math.lgamma(a + k) + math.lgamma(b + n - k) - math.lgamma(a + b + n)
                  - math.lgamma(a) - math.lgamma(b) + math.lgamma(a + b))
    return total


def fit_concentration(rows: Sequence[tuple[float, float, float]], default: float = DEFAULT_CONCENTRATION,
                      grid: Sequence[float] = CONCENTRATION_GRID) -> float:
    """The pseudo-count m on `grid` that best explains the groups' (mean, passes, n) rows, each
    group's rate a draw Beta(m mean, m (1 - mean)) (the mean: its family rate for m, its task's
    mean without it for k): the Beta-binomial marginal likelihood times a log-normal prior around
    `default` (sd ln 4, so a few groups cannot pull m to the grid's ends); `default` until two groups
    have two rollouts each (one rollout says nothing about m)."""
    rows = [r for r in rows if r[2] >= 2.0]
    if len(rows) < 2:
        return default

    def score(m: float) -> float:
        return _log_marginal(m, rows) - 0.5 * (math.log(m / default) / math.log(4.0)) ** 2

    return max(grid, key=lambda m: (score(m), -m))


@dataclass
class _Counts:
    """Decayed (passes, n) per (family, harness) and per (task, harness), and m and k per harness."""

    family: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    task: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    task_family: dict[tuple[str, str], str] = field(default_factory=dict)
    m: dict[str, float] = field(default_factory=dict)
    k: dict[str, float] = field(default_factory=dict)


class DifficultyTracker:
    """The observations of a run and the estimates and weights they give (see the module docstring)."""

    def __init__(self, observations: Iterable[Observation] = (), cfg: SamplerConfig | None = None,
                 eval_delay: int = 0):
        self.cfg = cfg or SamplerConfig()
        self.observations: list[Observation] = list(observations)
        self.eval_delay = eval_delay
        self._changes = 0  # observe / forget_eval calls: the cache key's version
        self._cache: dict[tuple[int, int, int], _Counts] = {}  # (at, observations, changes) -> counts

    # -- recording -------------------------------------------------------------------------------

    def observe(self, obs: Observation) -> None:
        self.observations.append(obs)
        self._changes += 1

    def forget_eval(self, step: int) -> None:
        """Drop the eval groups of `step` (an eval that runs again, after a crash before its record)."""
        self.observations = [o for o in self.observations if not (o.split == "eval" and o.step == step)]
        self._changes += 1

    def until(self, step: int) -> "DifficultyTracker":
        """The tracker as its plans saw it after step `step`: training groups of steps <= step, and
        eval groups that had run by then (`eval_delay` steps later; the baseline's at once)."""
        return type(self)([o for o in self.observations if self._seen(o, step)], self.cfg, self.eval_delay)

    def _seen(self, o: Observation, step: int) -> bool:
        if o.split != "eval" or o.step == 0:
            return o.step <= step
        return o.step <= step - self.eval_delay

    # -- estimates -------------------------------------------------------------------------------

    def _counts(self, at: int) -> _Counts:
        key = (at, len(self.observations), self._changes)
        if key not in self._cache:
            self._cache = {key: self._count(at)}  # one `at` at a time: plans ask for one step
        return self._cache[key]

    def _weight(self, o: Observation, at: int) -> float:
        return self.cfg.decay ** max(at - 1 - o.step, 0)

    def _count(self, at: int) -> _Counts:
        c = _Counts()
        for o in self.observations:
            w = self._weight(o, at)
            for table, k in ((c.family, (o.family, o.harness)), (c.task, (o.task, o.harness))):
                row = table.setdefault(k, [0.0, 0.0])
                row[0] += w * o.passes
                row[1] += w * o.n
            c.task_family[(o.task, o.harness)] = o.family
        for harness in {h for _, h in c.task}:
            mine = [o for o in self.observations if o.harness == harness]
            if self.cfg.concentration is not None:
                c.m[harness] = self.cfg.concentration
            else:
                c.m[harness] = fit_concentration([(self._family_rate(c, o.family, harness), float(o.passes),
                                                   float(o.n)) for o in mine])
            if self.cfg.dispersion is not None:
                c.k[harness] = self.cfg.dispersion
            else:  # each group against its task's mean without it (leave one out)
                rows = [(self._task_mean(c, o.task, o.family, harness, (self._weight(o, at), o)), float(o.passes),
                         float(o.n)) for o in mine]
                c.k[harness] = fit_concentration(rows, DEFAULT_DISPERSION)
        return c

    def _task_mean(self, c: _Counts, task: str, family: str, harness: str,
                   without: tuple[float, Observation] | None = None) -> float:
        """The posterior mean of a task's rate; `without` (weight, group): less that group's counts."""
        f = self._family_rate(c, family, harness)
        m = c.m.get(harness, self.cfg.concentration or DEFAULT_CONCENTRATION)
        passes, n = c.task.get((task, harness), (0.0, 0.0))
        if without is not None:
            w, o = without
            passes, n = max(passes - w * o.passes, 0.0), max(n - w * o.n, 0.0)
        return (m * f + passes) / (m + n)

    def _family_rate(self, c: _Counts, family: str, harness: str) -> float:
        passes, n = c.family.get((family, harness), (0.0, 0.0))
        return (self.cfg.prior * 0.5 + passes) / (self.cfg.prior + n)

    def family_rate(self, family: str, harness: str, at: int) -> float:
        return self._family_rate(self._counts(at), family, harness)

    def concentration(self, harness: str, at: int) -> float:
        """The pseudo-count m of a task's prior for `harness` (configured, or fitted)."""
        return self._counts(at).m.get(harness, self.cfg.concentration or DEFAULT_CONCENTRATION)

    def dispersion(self, harness: str, at: int) -> float:
        """The pseudo-count k of a group's rate around its task's mean for `harness` (configured, or fitted)."""
        return self._counts(at).k.get(harness, self.cfg.dispersion or DEFAULT_DISPERSION)

    def posterior(self, task: str, family: str, harness: str, at: int) -> tuple[float, float]:
        """(a, b) of the Beta posterior of `task`'s pass rate through `harness` when step `at` is planned."""
        c = self._counts(at)
        f = self._family_rate(c, family, harness)
        m = c.m.get(harness, self.cfg.concentration or DEFAULT_CONCENTRATION)
        passes, n = c.task.get((task, harness), (0.0, 0.0))
        return m * f + passes, m * (1.0 - f) + n - passes

    def pass_rate(self, task: str, family: str, harness: str, at: int) -> float:
        """The posterior mean pass rate of `task` through `harness` when step `at` is planned."""
        a, b = self.posterior(task, family, harness, at)
        return a / (a + b)

    def p_mixed(self, task: str, family: str, harness: str, at: int, n: int) -> float:
        """The chance that a group of n fresh rollouts of `task` has mixed outcomes: its rate a draw
        Beta(k mu, k (1 - mu)) around the task's posterior mean mu (see the module docstring)."""
        mu, k = self.pass_rate(task, family, harness, at), self.dispersion(harness, at)
        return p_mixed(k * mu, k * (1.0 - mu), n)

    def posterior_p_mixed(self, task: str, family: str, harness: str, at: int, n: int) -> float:
        """The same chance under the task's posterior itself, 1 - E[p^n] - E[(1 - p)^n] (the
        sampler's estimate before issue 43: surer with every group; kept for the comparison)."""
        return p_mixed(*self.posterior(task, family, harness, at), n)

    def weight(self, task: str, family: str, harness: str, at: int, n: int) -> float:
        """The sampling weight: 1 for the uniform sampler, else max(P(mixed of n) ** sharpness, floor)."""
        if self.cfg.type == "uniform":
            return 1.0
        return max(self.p_mixed(task, family, harness, at, n) ** self.cfg.sharpness, self.cfg.floor, 1e-6)

    def borrowable(self, task: str, harness: str, before: int) -> Borrowable | None:
        """The latest passing fresh rollout of `task` through `harness` from a step before `before`."""
        found = [o for o in self.observations if o.task == task and o.harness == harness and o.passing
                 and o.step < before and o.split != "eval"]
        if not found:
            return None
        last = max(found, key=lambda o: o.step)
        return Borrowable(last.passing, last.step)

    # -- persistence -----------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {"version": 2, "observations": [asdict(o) for o in self.observations]}

    def save(self, run_dir: Path) -> Path:
        """Write <run_dir>/difficulty.json atomically (a crash leaves the old file or the new one)."""
        path = Path(run_dir) / FILE_NAME
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1))
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, run_dir: Path, cfg: SamplerConfig | None = None, last_step: int | None = None,
             eval_delay: int = 0) -> "DifficultyTracker":
        """The tracker of a run directory (empty for a new run), kept to the groups of the steps up
        to `last_step` (the resume point: a step after it runs again), evals of those steps included."""
        path = Path(run_dir) / FILE_NAME
        if not path.is_file():
            return cls((), cfg, eval_delay)
        try:
            rows = json.loads(path.read_text()).get("observations", [])
            obs = [Observation(**{k: row[k] for k in Observation.__dataclass_fields__ if k in row}) for row in rows]
        except (ValueError, TypeError, AttributeError) as err:
            raise ValueError(f"{path}: not a difficulty tracker file ({err}); move it away to start "
                             "the estimates afresh") from err
        kept = obs if last_step is None else [o for o in obs if o.step <= last_step]
        return cls(kept, cfg, eval_delay)


def planned_from(step: int, max_policy_lag: int) -> int:
    """The last step whose observations the plan of `step` may use: its rollouts start once step
    step - max(max_policy_lag, 1) has collected (run/loop.py `start_ahead`)."""
    return step - max(max_policy_lag, 1)


def task_family(task: Any) -> str:
    """A task's family (the builtin suite's; "" for tasks without one)."""
    return str(getattr(task, "family", "") or "")


def picks_summary(picks: Sequence[dict[str, Any]]) -> float:
    """The mean estimated pass rate of a step's picks (0.5 when there are none)."""
    ps = [float(p["p"]) for p in picks if isinstance(p.get("p"), (int, float))]
    return sum(ps) / len(ps) if ps else 0.5


def brier(pairs: Iterable[tuple[float, bool]]) -> float | None:
    """Mean squared error of predicted chances against what happened (None without pairs)."""
    pairs = list(pairs)
    return sum((p - float(y)) ** 2 for p, y in pairs) / len(pairs) if pairs else None
