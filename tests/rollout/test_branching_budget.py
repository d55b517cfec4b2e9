"""The step records what a branched group cost in sampling (run/step_groups.py step_rollout_stats,
rollout/branching.py sampling_budget): replayed prefix tokens cost no sampling, and rollouts per
group are set against the nominal budget n_per_group + points x width."""

from __future__ import annotations

from harnessrl.rollout.groups import PlannedGroup
from harnessrl.rollout.plan import GroupPlan
from harnessrl.config import load_config
from harnessrl.run.step_groups import step_rollout_stats
from harnessrl.report.record import StepRecord
from tests.tree.test_branching import branched_group


def test_the_step_records_sampled_and_replayed_tokens_against_the_nominal_budget():
    calls, rollouts = branched_group()  # a: [1] [2]; c: [4]; b1, b2 replay a's [1], then [3] / [6]
    group = PlannedGroup(GroupPlan("g0", None, "synthetic", 2, "train", 1), rollouts, calls)
    cfg = load_config(None, ["loop.n_per_group=2", "loop.branching={points: 1, width: 2}"])
    stats = step_rollout_stats(cfg, [group])
    assert stats.budget == {"tokens_sampled": 5.0, "tokens_replayed": 2.0, "rollouts_per_group": 4.0,
                            "nominal_rollouts_per_group": 4.0}
    row = StepRecord(policy_version=1, rollouts=stats).to_json()
    assert row["budget"]["tokens_sampled"] == 5.0 and row["budget"]["tokens_replayed"] == 2.0
    assert StepRecord.from_json(row).rollouts.budget == stats.budget
    flat = step_rollout_stats(load_config(None, ["loop.n_per_group=4"]), [group])
    assert flat.budget["nominal_rollouts_per_group"] == 4.0 and flat.branching is None
