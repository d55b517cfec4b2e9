"""One step's record: what a training step (or the baseline eval, step 0) measured.

`StepRecord` is made of typed parts, one per phase of the step that measured them. The run store
keeps it as JSON (`StepRecord.to_json`, one flat object per step); the report, plots, display and
benchmarks read those objects back from the store or metrics.jsonl. The JSON keys are the field
names below (the eval part writes "eval" and "eval_sets"); a part that a step did not produce
(no trees trained, no eval this step) writes no keys at all, and a field that is None is left out.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


def _present(part: Any) -> dict[str, Any]:
    return {k: v for k, v in asdict(part).items() if v is not None}


@dataclass
class RolloutStats:
    """The step's training rollouts, per harness (`rollout.metrics.harness_summary`)."""

    reward: dict[str, float]  # mean reward of the ok rollouts
    pass_rate: dict[str, float]  # share of rollouts that passed (`rollout_passed`)
    rollouts: dict[str, float]
    failed: dict[str, float]  # rollouts that did not end ok with a reward
    calls_per_rollout: dict[str, float]
    memory_held: dict[str, float] = field(default_factory=dict)  # rollouts held back for free memory


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
class UpdateStats:
    """One trainer update (`Trainer.update`): means over the trained tokens weighted by path weight,
    and the token counts. The weighted means are absent when no token reached the loss."""

    clip_frac: float | None = None
    is_weight: float | None = None
    is_kept: float | None = None
    kl: float | None = None
    abs_logp_gap: float | None = None  # mean |logp_trainer - logp_engine| of the sampled tokens
    mismatch_kl: float | None = None  # KL(engine || trainer) on the sampled tokens
    is_capped: float | None = None
    entropy: float | None = None
    loss: float = 0.0
    tokens_trained: float = 0.0
    grad_norm: float = 0.0
    tokens_computed: float = 0.0
    unique_tree_tokens: float = 0.0
    chunks: float = 0.0
    value_loss: float | None = None  # ppo's critic


@dataclass
class EvalResult:
    """Held-out evaluation: pass@1 per harness on the headline set, and per eval set and harness
    the aggregate (pass@k, its 95% interval, task and rollout counts)."""

    pass_at_1: dict[str, float]
    sets: dict[str, dict[str, dict[str, Any]]] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"eval": self.pass_at_1, **({} if self.sets is None else {"eval_sets": self.sets})}


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

    def to_json(self) -> dict[str, Any]:
        """The flat JSON object the store keeps for the step."""
        out: dict[str, Any] = {}
        for part in (self.rollouts, self.trees, self.lag, self.update):
            if part is not None:
                out.update(_present(part))
        out["policy_version"] = self.policy_version
        if self.eval is not None:
            out.update(self.eval.to_json())
        out["time"] = dict(self.time)
        return out


REDONE: dict[str, Any] = {"redone": True}  # stored for a step after the last checkpoint, until it is redone
