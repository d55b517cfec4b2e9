"""cluster.ray.trainer_world_size=2: `harnessrl train`'s entry (run.loop.run_training) on a local
Ray cluster with the default model (LoRA adapters: two full-fine-tuning ranks, their Adam state and
the engine do not fit next to the box's other runs), its trainer as 2 FSDP2 ranks (gloo) in Ray
actors, through a whole step: the update, the weight sync (the engine actor serves version 1) and
the checkpoint (rank 0 writes a plain HF dir, adapters merged, that differs from the base model in
the adapted weights). The same run with one trainer actor writes the same weights, within float
tolerance. (tests/scale/test_fsdp.py checks the
sharded step against the one-process step at the trainer level; test_ray.py the 1-rank Ray run.)"""

from __future__ import annotations

import warnings

import pytest

ray = pytest.importorskip("ray")
torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.scale, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def base_dir():
    from harnessrl.engine import ModelNotFound, resolve_model

    try:
        return resolve_model(None)
    except ModelNotFound as err:
        pytest.skip(f"the default model is not prepared (harnessrl model prepare): {err}")


def _cfg(run_dir, world: int):
    from harnessrl.config import load_config

    ov = ["engine.type=hf", "sandbox.type=local", "loop.steps=1", "loop.groups_per_step=2", "loop.n_per_group=4",
          "loop.eval_size=0", "loop.max_turns=2", "serve.max_tokens=48", "loop.concurrency=1", "loop.seed=1",
          "tasks.families=[touch_file, write_word]", "optimizer.lr=1e-4", "model.lora.r=8",
          "model.gradient_checkpointing=true", "algorithm.harness_grad_cosine=false",
          # concurrency 1: the engine draws each request's seed in arrival order, so both runs sample
          # the same rollouts; the real model can score a whole group alike (no update to compare): replace such groups
          "loop.dynamic_sampling.enabled=true", "loop.dynamic_sampling.max_extra_groups=6",
          "loop.dynamic_sampling.target_share=0",  # the replacement budget only: no top-up rounds (test time)
          f"output.run_dir={run_dir}", "output.tensorboard=false", "cluster.backend=ray",
          "cluster.ray.rollout_workers=1", f"cluster.ray.trainer_world_size={world}"]
    return load_config(None, ov)


def _run(run_dir, world: int) -> tuple[dict, dict]:
    """(the step's record, the checkpoint's weights) of a one-step run."""
    from rich.console import Console
    from safetensors.torch import load_file

    from harnessrl.run.loop import run_training

    res = run_training(_cfg(run_dir, world), console=Console(quiet=True))
    assert res.last_step == 1
    policy = run_dir / "checkpoints" / "step_000001" / "policy"
    assert (policy.parent / "trainer.pt").is_file()
    return res.records[-1], load_file(str(policy / "model.safetensors"))


def test_two_trainer_ranks_train_sync_and_checkpoint(base_dir, tmp_path, cluster):
    from transformers import AutoModelForCausalLM

    warnings.simplefilter("ignore")
    rec, two = _run(tmp_path / "two", world=2)
    assert rec["policy_version"] == 1  # the engine actor serves the synced weights
    assert sum(rec["rollouts"].values()) == 4 * (2 + rec["extra_groups"])  # 2 groups of 4, and each replacement
    assert rec["tokens_trained"] > 0
    # rank 0's checkpoint is a plain HF model, moved away from the base by the step where adapted
    policy = tmp_path / "two" / "checkpoints" / "step_000001" / "policy"
    loaded = AutoModelForCausalLM.from_pretrained(policy).state_dict()
    base = AutoModelForCausalLM.from_pretrained(base_dir).state_dict()
    assert set(loaded) == set(base)
    adapted = {k for k in base if k.endswith("_proj.weight")}
    assert len(adapted) == 7 * 30  # q k v o gate up down in every layer
    assert {k for k in base if not torch.equal(loaded[k], base[k])} == adapted

    # one trainer actor on the same rollouts (same seeds): the same step
    one_rec, one = _run(tmp_path / "one", world=1)
    assert one_rec["tokens_trained"] == rec["tokens_trained"]
    assert one_rec["loss"] == pytest.approx(rec["loss"], rel=1e-4, abs=1e-6)
    assert set(one) == set(two)
    diffs = {k: float((two[k] - one[k]).abs().max()) for k in one}
    print("max |2-rank - 1-rank| weight:", max(diffs.values()))
    for k in one:
        assert torch.allclose(two[k], one[k], rtol=1e-4, atol=1e-6), (k, diffs[k])
