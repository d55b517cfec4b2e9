"""Learning smoke test for branching rollouts (fixed seed, tiny budget): SmolLM2-135M drives the
real Claude Code (tiny profile) on file jobs; after each step's groups end, one decision per group
is re-run twice through the harness with the earlier calls replayed (loop.branching), and tree-GRPO
credits each decision by the mean reward of what followed it. Hard checks: branches ran, none
diverged (the harness reproduced every replayed prompt), and the updates raised the expected
reward of their own groups to first order (tests/run/test_learning.py: reward_under_update, from
the checkpoints before and after each update, over every kept leaf of the tree)."""

from __future__ import annotations

import pytest
from rich.console import Console

from harnessrl.run.config import load_config
from harnessrl.run.loop import run_training

from .test_learning import reward_under_update

pytestmark = [pytest.mark.learning, pytest.mark.model, pytest.mark.bwrap, pytest.mark.harness]


def test_tree_grpo_with_branching_through_claude_code_raises_the_reward_of_its_groups(tmp_path):
    from harnessrl.harness import make_harness
    from harnessrl.run.loop import find_model
    from harnessrl.store import RunStore
    from harnessrl.train.checkpoint import checkpoint_dir

    if make_harness("claude-code:tiny").preflight():
        pytest.skip("claude-code is not installed (make harnesses)")
    run_dir = tmp_path / "run"
    cfg = load_config(None, [
        f"output.run_dir={run_dir}", "output.tensorboard=false", "output.keep_checkpoints=3",
        "harnesses=[{name: 'claude-code:tiny', weight: 1}]", "tasks.families=[touch_file, write_word]",
        "engine.type=auto", "render.tool_format=bash_examples", "serve.default_temperature=0.7",
        "algorithm.name=tree_grpo", "algorithm.reward=pass", "optimizer.lr=3e-5", "loop.steps=2",
        "loop.groups_per_step=2", "loop.n_per_group=6", "loop.eval_size=0", "loop.max_turns=3",
        "loop.max_tokens=64", "loop.rollout_timeout_s=300", "loop.concurrency=8", "loop.seed=0",
        "loop.branching={points: 1, width: 2}"])
    res = run_training(cfg, console=Console(quiet=True))
    steps = [r for r in res.records if r["step"] > 0]
    assert len(steps) == 2
    store = RunStore(run_dir)
    try:
        branches = [r for r in store.list_rollouts() if r.lineage is not None]
        print("branches", [(r.rollout_id, r.lineage, r.reward) for r in branches])
        assert branches, "no branch ran (no group had a second served call?)"
        assert all(not b.lineage.diverged for b in branches), [b.lineage for b in branches]
        assert all(r["branching"]["branches"] >= 1 for r in steps), [r.get("branching") for r in steps]
        checked = []
        for step in (1, 2):
            before = find_model(None) if step == 1 else checkpoint_dir(run_dir, step - 1) / "policy"
            after = checkpoint_dir(run_dir, step) / "policy"
            for mean, first_order, estimate in reward_under_update(store, step, before, after):
                print(f"step {step}: group reward {mean:.3f}, first-order change {first_order:+.4f}")
                checked.append(first_order)
    finally:
        store.close()
    assert checked, "no group had differing rewards: no signal to check"
    assert sum(checked) / len(checked) > 0, f"the updates lowered the expected reward of their groups: {checked}"
