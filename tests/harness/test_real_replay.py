"""Replay to branch through REAL harnesses in bwrap: the harness is run again on the same task, the
proxy answers its first call with the parent's recorded answer, the harness re-executes the tool
call itself (the workspace is rebuilt), and the next call samples fresh. The replayed call's prompt
must match the recorded one (by ids, or by meaning with ids and clocks masked) or be recorded as a
divergence; here, with a deterministic scripted policy, every replay must match."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.harness, pytest.mark.bwrap, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def task():
    from harnessrl.tasks.loader import load_tasks

    return next(t for t in load_tasks("builtin:train") if t.reference_solution and t.category == "data_extraction")


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_a_replayed_branch_reproduces_the_recorded_prompts_then_samples_fresh(harness, task, kit, tmp_path):
    from harnessrl.rollout.branching import BranchingConfig, branch_plans
    from harnessrl.rollout.jobs import RunOptions, run_plans
    from harnessrl.rollout.plan import plan_cross
    from harnessrl.sandbox.base import SandboxConfig

    kit.require_installed(harness)
    rig = kit.ProxyRig(harness, tmp_path / "run", cmd=" && ".join(task.reference_solution))
    opts = RunOptions(sandbox_cfg=SandboxConfig(type="bwrap"), model="smollm2", max_turns=6,
                      harness_timeout_s=600, start_retries=0)
    try:
        plans = plan_cross([task], [harness], 1, step=1, attempt=1, split="train")
        [parent] = run_plans(plans, proxy=rig.server, store=rig.store, opts=opts)
        assert parent.status == "ok" and task.passed(parent.reward), (parent.status, parent.error)
        parent_calls = rig.calls(parent.rollout_id)
        assert len(parent_calls) >= 2
        waves = branch_plans(rig.store, plans, BranchingConfig(points=1, width=1, placement="random"))
        [branch] = run_plans(waves, proxy=rig.server, store=rig.store, opts=opts)
        lineage = branch.lineage
        j = lineage.branch_call
        calls = rig.calls(branch.rollout_id)
        print(f"{harness}: branch at call {j} of {len(parent_calls)}; replayed {lineage.replayed} "
              f"({lineage.exact} exact); diverged {lineage.diverged!r}; status {branch.status}")
        assert lineage.diverged == "" and lineage.replayed == j
        # every rollout of a task renders the same prompt (RunDirs.for_task): the replay is exact, so
        # the branch shares the parent's tree nodes up to its branch point
        assert lineage.exact == j, "the harness's prompt changed between two runs of the task"
        replays = [c.meta["replay"] for c in calls if "replay" in c.meta]
        assert [r["of"] for r in replays] == [c.call_id for c in parent_calls[:j]]
        for c, p in zip(calls[:j], parent_calls[:j]):
            assert list(c.sampled_ids) == list(p.sampled_ids)
        assert len(calls) > j and "replay" not in calls[j].meta  # then it sampled fresh
        assert branch.status == "ok" and task.passed(branch.reward), (branch.status, branch.error)
    finally:
        rig.close()
