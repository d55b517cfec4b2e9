"""Learning through the white-box AgentLoop (`harness: whitebox`): SmolLM2-135M runs builtin's agent
loop inside the run process (engine called with token ids, commands in bwrap), GRPO updates it.

Hard check, as for Claude Code in test_learning.py: the update raised the expected reward of its
own groups to first order (mean over groups of cov(reward, log p_after - log p_before) over the
sampled rollouts, from the base model and the step-1 checkpoint: no sampling noise). The log-probs
come from one tree-packed forward per group (the ~700-token shared prompt computed once: a plain
forward per rollout took 20 min on the 2-core box; packing is exact, tests/algo/test_exactness.py).
Misaligned records, a sign error or an update that never reaches the checkpoint fail it."""

from __future__ import annotations

import pytest
from rich.console import Console

from harnessrl.config import load_config
from harnessrl.run.loop import run_training


pytestmark = [pytest.mark.learning, pytest.mark.model, pytest.mark.bwrap]


def test_whitebox_grpo_raises_the_expected_reward_of_its_groups(tmp_path):
    from harnessrl.run.open_run import find_model
    from harnessrl.store import RunStore
    from harnessrl.train.checkpoint import checkpoint_dir

    run_dir = tmp_path / "run"
    cfg = load_config(None, [
        f"output.run_dir={run_dir}", "output.tensorboard=false", "output.keep_checkpoints=2",
        "harnesses=[{name: whitebox, weight: 1}]", "tasks.families=[write_word, touch_file]",
        "algorithm.name=grpo", "optimizer.lr=3e-5", "loop.steps=1", "loop.groups_per_step=2",
        "loop.n_per_group=8", "loop.eval_size=0", "loop.max_turns=2", "serve.max_tokens=64",
        "loop.concurrency=8", "loop.seed=0",
        # the engine draws seeds in arrival order, so 2 groups can both come back uniform (seen in a
        # fresh-clone run): such a group is replaced, up to 4 times
        "loop.dynamic_sampling.enabled=true", "loop.dynamic_sampling.max_extra_groups=4",
        "loop.dynamic_sampling.target_share=0"])  # the replacement budget only: no top-up rounds (test time)
    res = run_training(cfg, console=Console(quiet=True))
    print("train reward (sampled)", [r["reward"] for r in res.records if r["step"] > 0])
    store = RunStore(run_dir)
    try:
        calls = store.list_calls()
        assert calls and {c.protocol for c in calls} == {"whitebox"}
        checked = first_order_changes(store, 1, find_model(None), checkpoint_dir(run_dir, 1) / "policy")
    finally:
        store.close()
    for mean, first_order in checked:
        print(f"group reward {mean:.3f}, first-order change {first_order:+.4f}")
    assert checked, "no group had differing rewards: no GRPO signal to check (base pass rate changed?)"
    assert sum(fo for _, fo in checked) / len(checked) > 0, f"the update lowered its groups' expected reward: {checked}"


def rollout_logps_packed(model_dir, tree) -> dict[str, float]:
    """{rollout: sum of log p(sampled id | its ancestors)} at the sampling temperature, each tree
    token computed once (one packed forward per chunk)."""
    import torch
    from transformers import AutoModelForCausalLM

    from harnessrl.train.packing import pack_forest, token_logprobs
    from harnessrl.train.sft import sft_batch
    from harnessrl.train.trainer import chunk_targets

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa").eval()
    batch, flat = sft_batch([tree]), tree.flat()
    out = {r: 0.0 for r in tree.kept_rollouts()}
    with torch.no_grad():
        for chunk in pack_forest(batch.forest, 4096):
            tg = chunk_targets(chunk, batch)
            if not len(tg.local):
                continue
            g = chunk.index[tg.local.numpy()]
            temperature = torch.as_tensor(flat.temperature[g], dtype=torch.float32)
            logp, _ = token_logprobs(model, chunk, tg.local, temperature, "sdpa")
            for q, lp in zip(g, logp.tolist()):
                for r in tree.nodes[int(flat.node_index[q])].decision_rollouts:
                    if r in out:
                        out[r] += lp
    return out


def first_order_changes(store, step: int, before, after) -> list[tuple[float, float]]:
    """Per train group of `step` with differing rewards: (mean reward, mean over its rollouts of
    (reward - mean) x (log p_after - log p_before) of the rollout's sampled ids)."""
    from harnessrl.store.groups import group_calls, group_rollouts
    from harnessrl.tree.build import build_tree

    out = []
    for group in group_rollouts([r for r in store.list_rollouts(step=step) if not r.group_id.startswith("eval-")]):
        rs = [r for r in group.rollouts if r.status == "ok" and r.reward is not None]
        if len({r.reward for r in rs}) < 2:
            continue
        tree = build_tree(group_calls(store, rs), rs)
        old, new = rollout_logps_packed(before, tree), rollout_logps_packed(after, tree)
        rs = [r for r in rs if r.rollout_id in old]
        mean = sum(r.reward for r in rs) / len(rs)
        out.append((mean, sum((r.reward - mean) * (new[r.rollout_id] - old[r.rollout_id]) for r in rs) / len(rs)))
    return out
