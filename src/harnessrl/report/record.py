"""One step's record: what a training step (or the baseline eval, step 0) measured.

`StepRecord` is made of typed parts, one per phase of the step that measured them. The run store
keeps it as JSON (`StepRecord.to_json`, one flat object per step); the report, plots, display and
benchmarks read those objects back from the store or metrics.jsonl. The JSON keys are the field
names below (the eval part writes "eval" and "eval_sets"); a part that a step did not produce
(no trees trained, no eval this step) writes no keys at all, and a field that is None is left out.
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, TypeVar

from harnessrl.train.update_stats import UpdateStats

__all__ = ["REDONE", "EngineWork", "EvalResult", "PolicyLag", "RolloutStats", "SamplingStats", "StepRecord",
           "TreeTotals", "UpdateStats", "step_records"]

Part = TypeVar("Part")


def _present(part: Any) -> dict[str, Any]:
    return {k: v for k, v in asdict(part).items() if v is not None}


def _part(cls: type[Part], row: dict[str, Any]) -> Part | None:
    """The part `cls` read back from a flat row: None when the step wrote none of its keys (a part
    a step did not produce) or not all it must have; keys of other parts are not its business."""
    spec = fields(cls)  # type: ignore[arg-type]  # a Part is one of the dataclasses of this module
    names = [f.name for f in spec]
    required = [f.name for f in spec if f.default is MISSING and f.default_factory is MISSING]
    if not any(n in row for n in names) or not all(n in row for n in required):
        return None
    return cls(**{n: row[n] for n in names if n in row})


@dataclass
class RolloutStats:
    """The step's training rollouts, per harness (`rollout.pass_at_k.harness_summary`)."""

    reward: dict[str, float]  # mean reward of the ok rollouts
    pass_rate: dict[str, float]  # share of rollouts that passed (`rollout_passed`)
    rollouts: dict[str, float]
    failed: dict[str, float]  # rollouts that did not end ok with a reward
    calls_per_rollout: dict[str, float]
    memory_held: dict[str, float] = field(default_factory=dict)  # rollouts held back for free memory
    branching: dict[str, float] | None = None  # loop.branching: branches, diverged, exact share
    # sampling cost (rollout/branching.py sampling_budget): tokens_sampled by the engine, tokens_replayed
    # from a parent (no sampling), rollouts_per_group run against nominal_rollouts_per_group
    budget: dict[str, float] | None = None


@dataclass
class TreeTotals:
    """The step's prefix trees (sums of `tree.stats.TreeStats` over the trained trees)."""

    unique_tokens: float
    decision_tokens: float
    per_call_tokens: float
    per_rollout_tokens: float
    branches: float
    trees: float
    groups: float  # groups read back from the store
    groups_trained: float  # groups whose tree trains at least one token (= trees)


@dataclass
class PolicyLag:
    """How many versions behind the trainer the sampling policy of each trained token was."""

    policy_lag_tokens: dict[str, float]  # lag (as a string, a JSON key) -> decision tokens
    policy_lag_mean: float
    policy_lag_max: float
    policy_lag_dropped: float  # tokens past loop.max_policy_lag, taken out of the loss


@dataclass
class EngineWork:
    """What the engine itself reported over the step's requests (engine/engine_stats.py): the prompt
    tokens it was sent, those its prefix cache served (so it computed the rest), and the
    request-seconds of prefill and decode."""

    engine_requests: float
    engine_prompt_tokens: float
    engine_cached_tokens: float
    engine_reported: float  # requests that reported their cached tokens
    engine_prefill_s: float | None = None
    engine_decode_s: float | None = None

    @property
    def cache_hit_rate(self) -> float | None:
        """Share of the sent prompt tokens the prefix cache served (None: the engine reported none)."""
        if not self.engine_reported or not self.engine_prompt_tokens:
            return None
        return self.engine_cached_tokens / self.engine_prompt_tokens


@dataclass
class SamplingStats:
    """Which groups the step sampled and which could teach (run/step_groups.py, loop.sampler and
    loop.dynamic_sampling): informative = the group's rewards differ (mixed outcomes)."""

    informative_groups: float  # informative groups trained per slot of loop.groups_per_step (<= 1)
    sampled_informative: float  # informative groups / groups sampled (the sampler's hit rate)
    groups_sampled: float  # the step's groups, replacements included
    extra_groups: float  # groups beyond loop.groups_per_step (oversampled and replacements)
    wasted_rollouts: float  # rollouts (branches included) of groups without contrast
    rollouts_sampled: float
    pick_pass_rate: float  # the mean estimated pass rate of the step's picks (the tracker's, at planning)
    dropped_groups: dict[str, float] = field(default_factory=dict)  # reason -> groups left out of the update
    branch_points: float | None = None  # branch points that ran (loop.branching)
    branch_mixed: float | None = None  # share of them whose subtree has mixed outcomes
    borrowed_points: float | None = None  # of those, on a passing rollout of an earlier step
    borrowed_mixed: float | None = None
    branch_policy: str | None = None
    # {group, task, harness, p, weight, n, p_mixed (the posterior's, at the pick), mixed (the fresh samples')}
    sampler_picks: list[dict[str, Any]] = field(default_factory=list)
    dropped_log: list[dict[str, Any]] = field(default_factory=list)  # {group, task, harness, reason, rollouts}
    rescue_groups: float | None = None  # groups run because the step had no informative group left
    topup_groups: float | None = None  # groups run to reach dynamic_sampling.target_share (its top-up)
    # fresh rollouts of the groups beyond the step's own loop.groups_per_step (oversampled, replacements,
    # top-up and rescue groups): what dynamic sampling cost the step
    extra_rollouts: float | None = None


@dataclass
class EvalResult:
    """Held-out evaluation: pass@1 per harness on the headline set, and per eval set and harness
    the aggregate (pass@k, its 95% interval, task and rollout counts)."""

    pass_at_1: dict[str, float]
    sets: dict[str, dict[str, dict[str, Any]]] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"eval": self.pass_at_1, **({} if self.sets is None else {"eval_sets": self.sets})}

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> EvalResult | None:
        """The eval part of a stored row (None: the step ran no eval)."""
        if not isinstance(row.get("eval"), dict):
            return None
        sets = row.get("eval_sets")
        return cls(pass_at_1=dict(row["eval"]), sets=sets if isinstance(sets, dict) else None)


@dataclass
class StepRecord:
    """One step: the policy version the engine serves after it, seconds per phase, and the parts."""

    policy_version: int
    time: dict[str, float] = field(default_factory=dict)  # phase -> seconds (run.display.PHASES)
    rollouts: RolloutStats | None = None
    trees: TreeTotals | None = None
    lag: PolicyLag | None = None
    update: UpdateStats | None = None
    eval: EvalResult | None = None
    engine: EngineWork | None = None
    sampling: SamplingStats | None = None
    # phase -> CPU seconds of the run's processes (profile/run_profile.py CpuMeter: run, children, engine)
    cpu: dict[str, dict[str, float]] = field(default_factory=dict)
    wall_s: float | None = None  # the whole step, start to record
    # harness -> calls, tokens, context, failure modes, trained share of the step's rollouts (report/dynamics.py)
    dynamics: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The flat JSON object the store keeps for the step."""
        out: dict[str, Any] = {}
        for part in (self.rollouts, self.trees, self.lag, self.update, self.engine, self.sampling):
            if part is not None:
                out.update(_present(part))
        out["policy_version"] = self.policy_version
        if self.eval is not None:
            out.update(self.eval.to_json())
        out["time"] = dict(self.time)
        if self.cpu:
            out["cpu"] = {k: dict(v) for k, v in self.cpu.items()}
        if self.wall_s is not None:
            out["wall_s"] = self.wall_s
        if self.dynamics:
            out["dynamics"] = {h: dict(d) for h, d in self.dynamics.items()}
        return out

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> StepRecord:
        """The record a stored row (`to_json`, from the store or metrics.jsonl) was written from;
        a redone row (REDONE) or one of an older version reads as the parts it holds."""
        return cls(policy_version=int(row.get("policy_version", -1)), time=dict(row.get("time") or {}),
                   rollouts=_part(RolloutStats, row), trees=_part(TreeTotals, row), lag=_part(PolicyLag, row),
                   update=_part(UpdateStats, row), eval=EvalResult.from_json(row), engine=_part(EngineWork, row),
                   sampling=_part(SamplingStats, row),
                   cpu={k: dict(v) for k, v in (row.get("cpu") or {}).items() if isinstance(v, dict)},
                   wall_s=row.get("wall_s") if isinstance(row.get("wall_s"), (int, float)) else None,
                   dynamics={h: dict(d) for h, d in (row.get("dynamics") or {}).items() if isinstance(d, dict)})


def step_records(rows: list[dict[str, Any]]) -> list[tuple[int, StepRecord]]:
    """(step, record) of rows that carry their step (metrics.jsonl, `RunResult.records`), by step."""
    return sorted(((int(r["step"]), StepRecord.from_json(r)) for r in rows), key=lambda x: x[0])


REDONE: dict[str, Any] = {"redone": True}  # stored for a step after the last checkpoint, until it is redone
