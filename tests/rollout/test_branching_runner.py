"""Branch rollouts through the runner: the real builtin agent in a local sandbox re-executes the
replayed command (the workspace is rebuilt by the harness), then samples fresh; lineage is stored."""

from __future__ import annotations

from harnessrl.rollout.branching import BranchingConfig, branch_plans
from harnessrl.rollout.jobs import RunOptions, run_plans
from harnessrl.rollout.plan import plan_cross
from harnessrl.sandbox.base import SandboxConfig

LOCAL = SandboxConfig(type="local")


def test_a_branch_replays_its_parent_and_is_scored_on_the_rebuilt_workspace(proxy, store, tasks):
    task = next(t for t in tasks if t.family != "write_word")  # the scripted policy solves it in 2 calls
    opts = RunOptions(sandbox_cfg=LOCAL, max_turns=3, preflight=False)
    plans = plan_cross([task], ["builtin"], 1, step=1, attempt=1, split="train")
    [parent] = run_plans(plans, proxy=proxy, store=store, opts=opts)
    assert parent.reward == 1.0 and parent.call_count == 2
    waves = branch_plans(store, plans, BranchingConfig(points=1, width=2, placement="entropy"))
    assert [(b.parent, b.branch_call) for b in waves[0].branches] == [(parent.rollout_id, 1)] * 2
    branches = run_plans(waves, proxy=proxy, store=store, opts=opts)
    for b in branches:
        assert b.group_id == parent.group_id and b.sample_idx in (1, 2)
        assert b.status == "ok" and b.reward == 1.0, b.error  # the replayed command rebuilt the workspace
        assert b.lineage is not None and b.lineage.parent == parent.rollout_id
        assert (b.lineage.branch_call, b.lineage.replayed, b.lineage.exact, b.lineage.diverged) == (1, 1, 1, "")
        first, second = store.list_calls([b.rollout_id])
        assert first.meta["replay"]["of"] == store.list_calls([parent.rollout_id])[0].call_id
        assert "replay" not in second.meta
    assert store.get_rollout(branches[0].rollout_id).lineage == branches[0].lineage


def test_a_chained_tasks_own_turn_budget_wins_over_the_runs():
    from dataclasses import replace

    from harnessrl.rollout.jobs import turns_for
    from harnessrl.tasks import load_tasks

    chain = next(t for t in load_tasks("builtin:chain:long") if t.metadata["k"] == 6)
    assert turns_for(chain, RunOptions(max_turns=3)) == 14  # 2 + 2k
    plain = replace(chain, metadata={})
    assert turns_for(plain, RunOptions(max_turns=3)) == 3
    assert turns_for(replace(chain, metadata={"max_turns": True}), RunOptions(max_turns=3)) == 3
