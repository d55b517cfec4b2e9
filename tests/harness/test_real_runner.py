"""Issue 3 end to end through the rollout runner: each REAL harness solves one built-in task inside
bwrap (a scripted policy runs the task's reference solution through the harness's own tool, then
answers), the task's verifier scores it after the agent, and the reward, status and calls land in
the store. The command harness executes the model's reply as a shell command."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.harness, pytest.mark.bwrap, pytest.mark.timeout(1200)]

# a CLI 'harness': one chat call via the openai SDK; the reply is run as a shell command
EXEC_REPLY = ('python -c "import os, subprocess, openai; '
              "r = openai.OpenAI().chat.completions.create(model=os.environ['HARNESSRL_MODEL'], "
              "messages=[{'role': 'user', 'content': os.environ['TASK']}]); "
              "subprocess.run(r.choices[0].message.content, shell=True, check=True); print('ran it')\"")


@pytest.fixture(scope="module")
def task():
    from harnessrl.tasks.loader import load_tasks

    tasks = [t for t in load_tasks("builtin:train")
             if t.reference_solution and t.category == "data_extraction"]
    assert tasks, "the built-in suite has no data_extraction task with a reference solution"
    return tasks[0]


HARNESSES = ["builtin", "mini-swe-agent", "claude-code", "codex", "openclaw", "command"]


@pytest.mark.parametrize("harness", HARNESSES)
def test_runner_with_real_harness_scores_a_builtin_task(harness, task, kit, tmp_path):
    from harnessrl.rollout.jobs import run_groups
    from harnessrl.sandbox.base import SandboxConfig

    if harness != "command":
        kit.require_installed(harness)
    cmd = " && ".join(task.reference_solution)
    rig = kit.ProxyRig(harness, tmp_path / "run", cmd=cmd)
    spec = f"command:TASK={{task}} {EXEC_REPLY}" if harness == "command" else harness
    try:
        [record] = run_groups([task], [spec], 1, proxy=rig.server, store=rig.store,
                              sandbox_cfg=SandboxConfig(type="bwrap"), concurrency=1, model="smollm2",
                              max_turns=6, harness_timeout_s=600, start_retries=0, progress=False)
        assert record.status == "ok", (record.status, record.error)
        assert record.reward is not None and task.passed(record.reward), (record.reward, record.checks)
        assert rig.store.get_rollout(record.rollout_id).reward == record.reward
        calls = rig.calls(record.rollout_id)
        assert record.call_count == len(calls) >= (1 if harness == "command" else 2)
        assert all(c.status == "ok" for c in calls)
    finally:
        rig.close()
