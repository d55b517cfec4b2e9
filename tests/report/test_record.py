"""The step record's stored form: the JSON keys that the report, plots, display and benchmarks read."""

from __future__ import annotations

from harnessrl.report.record import (EvalResult, PolicyLag, RolloutStats, StepRecord, TreeTotals, UpdateStats,
                                  step_records)


def test_a_full_training_step_writes_the_flat_keys_readers_use():
    per_h = {"builtin": 1.0}
    rec = StepRecord(
        policy_version=3, time={"rollout": 1.0, "train": 2.0},
        rollouts=RolloutStats(reward=per_h, pass_rate=per_h, rollouts=per_h, failed=per_h, calls_per_rollout=per_h,
                              memory_held=per_h),
        trees=TreeTotals(unique_tokens=10, decision_tokens=4, per_call_tokens=30, per_rollout_tokens=20, branches=2,
                         trees=1, groups=2, groups_trained=1),
        lag=PolicyLag(policy_lag_tokens={"0": 4.0}, policy_lag_mean=0.0, policy_lag_max=0.0, policy_lag_dropped=0.0),
        update=UpdateStats(clip_frac=0.1, is_weight=1.0, is_kept=1.0, kl=0.0, abs_logp_gap=0.01, mismatch_kl=0.001,
                           is_capped=0.0, entropy=2.0, loss=-0.5, tokens_trained=4, grad_norm=1.5, tokens_computed=10,
                           unique_tree_tokens=10, chunks=1),
        eval=EvalResult(pass_at_1={"builtin": 0.5}, sets={"test": {"builtin": {"pass@1": 0.5, "n_tasks": 2}}}))
    row = rec.to_json()
    assert set(row) == {
        "reward", "pass_rate", "rollouts", "failed", "calls_per_rollout", "memory_held",
        "unique_tokens", "decision_tokens", "per_call_tokens", "per_rollout_tokens", "branches", "trees", "groups",
        "groups_trained", "policy_lag_tokens", "policy_lag_mean", "policy_lag_max", "policy_lag_dropped",
        "clip_frac", "is_weight", "is_kept", "kl", "abs_logp_gap", "mismatch_kl", "is_capped", "entropy", "loss",
        "tokens_trained", "grad_norm", "tokens_computed", "unique_tree_tokens", "chunks",
        "policy_version", "eval", "eval_sets", "time"}
    assert row["reward"] == {"builtin": 1.0} and row["eval"] == {"builtin": 0.5} and row["policy_version"] == 3
    assert row["eval_sets"]["test"]["builtin"]["pass@1"] == 0.5 and row["time"] == {"rollout": 1.0, "train": 2.0}


def test_parts_a_step_did_not_produce_write_no_keys():
    baseline = StepRecord(policy_version=0, time={"eval": 0.1}, eval=EvalResult(pass_at_1={})).to_json()
    assert baseline == {"policy_version": 0, "eval": {}, "time": {"eval": 0.1}}  # eval off: an empty headline
    no_tokens = StepRecord(policy_version=2, update=UpdateStats(loss=0.0, tokens_trained=0.0)).to_json()
    assert "clip_frac" not in no_tokens and "value_loss" not in no_tokens and "eval" not in no_tokens
    assert no_tokens["loss"] == 0.0 and no_tokens["tokens_trained"] == 0.0


def test_from_json_reads_back_what_to_json_wrote():
    """Readers (report, display, closing eval) get the typed record back from a stored row, part by part."""
    per_h = {"builtin": 1.0}
    full = StepRecord(
        policy_version=3, time={"rollout": 1.0},
        rollouts=RolloutStats(reward=per_h, pass_rate=per_h, rollouts=per_h, failed=per_h, calls_per_rollout=per_h),
        trees=TreeTotals(unique_tokens=10, decision_tokens=4, per_call_tokens=30, per_rollout_tokens=20, branches=2,
                         trees=1, groups=2, groups_trained=1),
        lag=PolicyLag(policy_lag_tokens={"0": 4.0}, policy_lag_mean=0.0, policy_lag_max=0.0, policy_lag_dropped=0.0),
        update=UpdateStats(clip_frac=0.1, loss=-0.5, tokens_trained=4, value_loss=0.25),
        eval=EvalResult(pass_at_1={"builtin": 0.5}, sets={"test": {"builtin": {"pass@1": 0.5}}}))
    baseline = StepRecord(policy_version=0, time={"eval": 0.1}, eval=EvalResult(pass_at_1={}))
    no_eval = StepRecord(policy_version=2, update=UpdateStats(loss=0.0, tokens_trained=0.0))
    for rec in (full, baseline, no_eval):
        assert StepRecord.from_json(rec.to_json()) == rec
        assert StepRecord.from_json(rec.to_json()).to_json() == rec.to_json()
    assert StepRecord.from_json(no_eval.to_json()).eval is None  # what the closing eval checks
    assert StepRecord.from_json({"redone": True}) == StepRecord(policy_version=-1)


def test_step_records_orders_rows_by_step():
    rows = [{"step": 2, **StepRecord(policy_version=2).to_json()}, {"step": 0, **StepRecord(policy_version=0).to_json()}]
    assert [(s, r.policy_version) for s, r in step_records(rows)] == [(0, 0), (2, 2)]


def test_trained_rewards_pass_mode_is_the_tasks_pass_rule():
    """reward=pass trains on 1/0 by the eval's pass rule; the verifier's partial credit (a file that
    exists with the wrong content: 0.5) counts as a fail; non-ok rollouts keep their None."""
    from harnessrl.rollout.groups import PlannedGroup
    from harnessrl.rollout.plan import plan_cross
    from harnessrl.algo.estimator import trained_rewards
    from harnessrl.store.records import RolloutRecord
    from harnessrl.tasks import load_tasks

    task = load_tasks("builtin:write_word:test")[0]
    plan = plan_cross([task], ["builtin"], 3, step=1, attempt=0, split="train")[0]

    def rec(i, status, reward):
        return RolloutRecord(rollout_id=f"r{i}", task_id=task.id, harness="builtin", group_id=plan.group_id,
                             status=status, reward=reward, step=1, sample_idx=i, category=task.category,
                             split="train")

    group = PlannedGroup(plan, [rec(0, "ok", 1.0), rec(1, "ok", 0.5), rec(2, "timeout", None)], [])
    assert [r.reward for r in trained_rewards(group, "score")] == [1.0, 0.5, None]
    assert [r.reward for r in trained_rewards(group, "pass")] == [1.0, 0.0, None]
    assert [r.reward for r in group.rollouts] == [1.0, 0.5, None]  # the stored records are untouched
