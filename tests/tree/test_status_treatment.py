"""How each rollout status is treated in training (docs/training.md, "Rollout statuses").

Policy outcomes carry a reward (the runner scored the workspace, 0 when nothing was left) and are
trained on like any other rollout, so ending abnormally is never cheaper than failing. Only
infrastructure failures, and rollouts in which the policy sampled nothing (no reward), are left
out of the group baseline and the loss.
"""

from __future__ import annotations

import pytest

from harnessrl.algo.advantages import grpo
from harnessrl.store.records import INFRASTRUCTURE_STATUSES, ROLLOUT_STATUSES, RolloutRecord, is_scored, rollout_passed
from harnessrl.tasks.model import Task, Verifier
from harnessrl.tree import build_tree
from tests.support.synthetic import make_call

SYSTEM = list(range(100, 110))
TASK = Task(id="task0", instruction="-", files={}, verifier=Verifier("checks", "true"))
POLICY_STATUSES = ("ok", "harness_error", "timeout", "verifier_error", "context_exceeded", "workspace_limit",
                   "workspace_link", "reward_forged")


def record(rid: str, status: str, reward: float | None) -> RolloutRecord:
    return RolloutRecord(rollout_id=rid, task_id="task0", harness="h", group_id="g0", status=status, reward=reward)


def calls(rid: str, base: int):
    return [make_call(rid, 0, SYSTEM, [base, base + 1])]


def test_every_status_is_either_infrastructure_or_a_policy_outcome():
    assert set(POLICY_STATUSES) | set(INFRASTRUCTURE_STATUSES) == set(ROLLOUT_STATUSES)
    assert not set(POLICY_STATUSES) & set(INFRASTRUCTURE_STATUSES)


@pytest.mark.parametrize("status", POLICY_STATUSES)
def test_a_scored_policy_outcome_is_trained_against(status):
    """A crash / timeout / overflow / broken verifier scored 0 lowers the group baseline: the
    rollout that did the job gets a positive advantage, the abnormal one a negative one."""
    rollouts = [record("a", "ok", 1.0), record("b", status, 0.0)]
    tree = build_tree(calls("a", 1) + calls("b", 50), rollouts)
    assert tree.rollouts["b"].kept and tree.rollouts["b"].filter_reason == ""
    assert is_scored(status, 0.0) and not rollout_passed(rollouts[1], TASK)
    adv = grpo(tree).rollout_adv
    assert adv["a"] > 0 > adv["b"]


@pytest.mark.parametrize("status", POLICY_STATUSES[1:])
def test_an_abnormal_end_that_left_the_job_done_passes(status):
    """The reward is the verifier's score of the workspace, however the harness ended."""
    assert rollout_passed(record("b", status, 1.0), TASK)


@pytest.mark.parametrize("status", INFRASTRUCTURE_STATUSES)
def test_infrastructure_failures_are_left_out_even_with_a_reward(status):
    rollouts = [record("a", "ok", 1.0), record("c", "ok", 0.0), record("b", status, 0.0)]
    tree = build_tree(calls("a", 1) + calls("c", 30) + calls("b", 50), rollouts)
    assert not tree.rollouts["b"].kept and tree.rollouts["b"].filter_reason == "abnormal_rollouts"
    assert not is_scored(status, 0.0) and not rollout_passed(record("b", status, 1.0), TASK)
    assert set(grpo(tree).rollout_adv) == {"a", "c"}  # not in the baseline


@pytest.mark.parametrize("status", POLICY_STATUSES[1:])
def test_an_unscored_abnormal_rollout_is_left_out(status):
    """No reward: the policy sampled nothing (a start failure, a first call refused as too long)."""
    tree = build_tree(calls("a", 1) + calls("b", 50), [record("a", "ok", 1.0), record("b", status, None)])
    assert not tree.rollouts["b"].kept and tree.rollouts["b"].filter_reason == "abnormal_rollouts"
