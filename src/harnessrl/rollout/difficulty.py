"""Which training tasks to sample: a running pass-rate estimate per task and harness, and the
sampling weight it gives (`loop.sampler`).

A group whose rollouts all pass or all fail gives GRPO no signal. A task's chance of a mixed group
is largest near a pass rate of p = 0.5, so the `difficulty` sampler draws a task for a harness with
weight max(p (1 - p), floor): the floor keeps every task in reach (a task at p = 0 today may pass
after a few updates; the estimate only moves if the task is sampled again).

The estimate is shrunk toward the task's family (per harness), so a task never sampled is
estimated by its family's rate and a family that never passes (a chain family too hard for the
model) is avoided after a few groups:

    family rate  f = (prior * 0.5 + sum_w passes over the family) / (prior + sum_w n over the family)
    task rate    p = (prior * f   + sum_w passes of the task)     / (prior + sum_w n of the task)

with each group's counts weighted by decay ** (steps since it ran): the policy changes, so an old
group says less about today's pass rate. Only fresh group samples are observed (a branch's outcome
depends on the prefix it replayed, rollout/branching.py).

The tracker is a list of observations (step, task, family, harness, passes, n, a passing rollout)
kept in <run_dir>/difficulty.json, written after every step's groups ran. A resumed run keeps the
observations of the steps it keeps (`until(last)`), so the estimate at a step is the same whether
or not the run was interrupted. A step is planned from the observations of the steps before it
that had ended when its rollouts could start (`planned_from`: with asynchronous rollouts, step s
starts while step s - max_policy_lag trains), so planning it twice gives the same groups.

The observations also remember, per task and harness, the latest passing fresh rollout: the
prefix a branch of an all-fail group may replay (`BranchingConfig.borrow`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

FILE_NAME = "difficulty.json"


class SamplerConfig(BaseModel):
    """`loop.sampler` of a run config: `uniform` (every task alike) or `difficulty` (weight
    max(p (1 - p), floor) from the tracker's estimate). `loop.sampler: difficulty` is short for
    `{type: difficulty}`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["uniform", "difficulty"] = "uniform"
    floor: float = Field(0.05, ge=0.0, le=0.25)  # weight floor (0.25 = p(1-p) at p = 0.5: uniform)
    prior: float = Field(2.0, gt=0)  # pseudo-rollouts of the family rate (and of 0.5 for a family)
    decay: float = Field(0.7, gt=0, le=1)  # weight of a group per step of age

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


@dataclass(frozen=True)
class Borrowable:
    """A recorded passing rollout of a task and harness (the prefix an all-fail group may replay)."""

    rollout_id: str
    step: int


class DifficultyTracker:
    """The observations of a run and the estimates and weights they give (see the module docstring)."""

    def __init__(self, observations: Iterable[Observation] = (), cfg: SamplerConfig | None = None):
        self.cfg = cfg or SamplerConfig()
        self.observations: list[Observation] = list(observations)

    # -- recording -------------------------------------------------------------------------------

    def observe(self, obs: Observation) -> None:
        self.observations.append(obs)

    def until(self, step: int) -> "DifficultyTracker":
        """The tracker as it was after step `step` (observations of later steps left out)."""
        return DifficultyTracker([o for o in self.observations if o.step <= step], self.cfg)

    # -- estimates -------------------------------------------------------------------------------

    def _weighted(self, at: int, keep: Any) -> tuple[float, float]:
        passes = n = 0.0
        for o in self.observations:
            if keep(o):
                w = self.cfg.decay ** max(at - 1 - o.step, 0)
                passes += w * o.passes
                n += w * o.n
        return passes, n

    def family_rate(self, family: str, harness: str, at: int) -> float:
        passes, n = self._weighted(at, lambda o: o.family == family and o.harness == harness)
        return (self.cfg.prior * 0.5 + passes) / (self.cfg.prior + n)

    def pass_rate(self, task: str, family: str, harness: str, at: int) -> float:
        """The estimated pass rate of `task` through `harness` when step `at` is planned."""
        f = self.family_rate(family, harness, at)
        passes, n = self._weighted(at, lambda o: o.task == task and o.harness == harness)
        return (self.cfg.prior * f + passes) / (self.cfg.prior + n)

    def weight(self, task: str, family: str, harness: str, at: int) -> float:
        """The sampling weight: 1 for the uniform sampler, else max(p (1 - p), floor)."""
        if self.cfg.type == "uniform":
            return 1.0
        p = self.pass_rate(task, family, harness, at)
        return max(p * (1.0 - p), self.cfg.floor, 1e-6)

    def borrowable(self, task: str, harness: str, before: int) -> Borrowable | None:
        """The latest passing fresh rollout of `task` through `harness` from a step before `before`."""
        found = [o for o in self.observations
                 if o.task == task and o.harness == harness and o.passing and o.step < before]
        if not found:
            return None
        last = max(found, key=lambda o: o.step)
        return Borrowable(last.passing, last.step)

    # -- persistence -----------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        return {"version": 1, "observations": [asdict(o) for o in self.observations]}

    def save(self, run_dir: Path) -> Path:
        """Write <run_dir>/difficulty.json atomically (a crash leaves the old file or the new one)."""
        path = Path(run_dir) / FILE_NAME
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.to_json(), indent=1))
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, run_dir: Path, cfg: SamplerConfig | None = None, last_step: int | None = None) -> "DifficultyTracker":
        """The tracker of a run directory (empty for a new run), kept to the steps up to `last_step`
        (the resume point: a step after it runs again)."""
        path = Path(run_dir) / FILE_NAME
        if not path.is_file():
            return cls((), cfg)
        try:
            rows = json.loads(path.read_text()).get("observations", [])
            obs = [Observation(**{k: row[k] for k in Observation.__dataclass_fields__ if k in row}) for row in rows]
        except (ValueError, TypeError, AttributeError) as err:
            raise ValueError(f"{path}: not a difficulty tracker file ({err}); move it away to start "
                             "the estimates afresh") from err
        tracker = cls(obs, cfg)
        return tracker if last_step is None else tracker.until(last_step)


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
