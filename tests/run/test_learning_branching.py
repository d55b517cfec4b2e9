"""Learning smoke test for branching rollouts (fixed seed, tiny budget): SmolLM2-135M drives the
real Claude Code (tiny profile) on file jobs; after each step's groups end, one decision per group
is re-run twice through the harness with the earlier calls replayed (loop.branching), and tree-GRPO
credits each decision by the mean reward of what followed it. Hard checks: branches ran, none
diverged (the harness reproduced every replayed prompt), and the updates raised the expected
reward of their own groups to first order, measured on on-policy samples only (`on_policy_changes`:
the group's fresh rollouts against each other, and at each branch point the siblings' own calls
from the branch call on; a replayed copy never counts), from the checkpoints before and after each
update (tests/run/test_learning.py: rollout_logps)."""

from __future__ import annotations

import pytest
from rich.console import Console

from harnessrl.config import load_config
from harnessrl.run.loop import run_training

from .test_learning import rollout_logps

pytestmark = [pytest.mark.learning, pytest.mark.model, pytest.mark.bwrap, pytest.mark.harness]


def on_policy_samples(rollouts, calls) -> dict[str, tuple[list[float], list]]:
    """comparison -> (rewards, the calls each sample sampled itself, re-keyed per sample): "root" over
    the group's fresh rollouts (drawn at the root); "<parent>@<j>" over the siblings at a branch
    point: the parent's served calls from call j on and each kept branch's own (not replayed) calls."""
    from dataclasses import replace

    from harnessrl.store.records import served_calls

    by_rollout: dict[str, list] = {}
    for c in calls:
        by_rollout.setdefault(c.rollout_id, []).append(c)
    scored = {r.rollout_id: r for r in rollouts if r.status == "ok" and r.reward is not None}
    out: dict[str, tuple[list[float], list]] = {}

    def add(key: str, rid: str, own: list) -> None:
        rewards, keyed = out.setdefault(key, ([], []))
        rewards.append(float(scored[rid].reward))
        keyed.append([replace(c, rollout_id=f"{key}/{rid}") for c in own])

    for rid, r in scored.items():
        own = served_calls(by_rollout.get(rid, []))
        if r.lineage is None:
            add("root", rid, own)
        elif not r.lineage.diverged:
            key = f"{r.lineage.parent}@{r.lineage.branch_call}"
            if key not in out and r.lineage.parent in scored:
                add(key, r.lineage.parent, served_calls(by_rollout[r.lineage.parent])[r.lineage.branch_call:])
            add(key, rid, [c for c in own if "of" not in ((c.meta or {}).get("replay") or {})])
    return out


def on_policy_changes(store, step: int, before, after) -> list[tuple[str, float]]:
    """(comparison, first-order change of its expected reward under the update) for every train group
    of `step` and every comparison in it (`on_policy_samples`) whose rewards differ: the mean over its
    samples of (reward - mean) x (log p_after - log p_before) of the ids the sample drew itself."""
    groups: dict[str, list] = {}
    for r in store.list_rollouts(step=step):
        if not r.group_id.startswith("eval-"):
            groups.setdefault(r.group_id, []).append(r)
    out = []
    for rollouts in groups.values():
        calls = [c for c in store.list_calls([r.rollout_id for r in rollouts]) if c.status == "ok" and len(c.sampled_ids)]
        for key, (rewards, keyed) in on_policy_samples(rollouts, calls).items():
            flat = [c for own in keyed for c in own]
            if len(set(rewards)) < 2 or not flat:
                continue
            old, new = rollout_logps(before, flat), rollout_logps(after, flat)
            ids = [own[0].rollout_id if own else "" for own in keyed]
            mean = sum(rewards) / len(rewards)
            out.append((key, sum((rw - mean) * (new.get(i, 0.0) - old.get(i, 0.0)) for rw, i in zip(rewards, ids))
                        / len(rewards)))
    return out


def test_tree_grpo_with_branching_through_claude_code_raises_the_reward_of_its_groups(tmp_path):
    from harnessrl.harness import make_harness
    from harnessrl.run.open_run import find_model
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
        "serve.max_tokens=64", "loop.rollout_timeout_s=300", "loop.concurrency=8", "loop.seed=0",
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
            for key, first_order in on_policy_changes(store, step, before, after):
                print(f"step {step}: {key}: first-order change {first_order:+.4f}")
                checked.append(first_order)
    finally:
        store.close()
    assert checked, "no group had differing rewards: no signal to check"
    assert sum(checked) / len(checked) > 0, f"the updates lowered the expected reward of their groups: {checked}"
