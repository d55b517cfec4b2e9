"""Learning smoke test: real SmolLM2 + the builtin harness in bwrap, GRPO, fixed seed, tiny budget.
On the easiest built-in family the train reward must rise above its first-step value."""

from __future__ import annotations

import pytest
from rich.console import Console

from harnessrl.train.config import load_config
from harnessrl.train.loop import run_training

pytestmark = [pytest.mark.learning, pytest.mark.model, pytest.mark.bwrap]


def test_grpo_reward_rises_on_easiest_family(tmp_path):
    cfg = load_config(None, [
        f"output.run_dir={tmp_path / 'run'}", "output.tensorboard=false", "output.keep_checkpoints=1",
        "harnesses=[{name: builtin, weight: 1}]", "tasks.families=[write_word]", "engine.type=auto",
        "algorithm.name=grpo", "optimizer.lr=3e-5", "loop.steps=3", "loop.groups_per_step=2",
        "loop.n_per_group=8", "loop.eval_size=0", "loop.max_turns=1", "loop.max_tokens=128", "loop.seed=0"])
    res = run_training(cfg, console=Console(quiet=True))
    rewards = [r["reward"]["builtin"] for r in res.records if r["step"] > 0]
    assert len(rewards) == 3
    assert max(rewards[1:]) > rewards[0], f"train reward per step {rewards}"
