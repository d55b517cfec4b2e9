"""Real SmolLM2: after a trainer step + weight sync, vLLM's logprobs for a fixed prompt equal the
trainer's (fp32 on both sides), and new generations record the new policy version."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
import torch

from harnessrl.engine.base import SamplingParams
from harnessrl.train.batch import TrainBatch
from harnessrl.train.losses import PPOSettings
from harnessrl.train.packing import forest_from_paths, pack_forest, token_logprobs
from harnessrl.train.trainer import Trainer

pytestmark = [pytest.mark.vllm, pytest.mark.model]


def trainer_logprobs(model, prompt, completion, temperature):
    forest, idx = forest_from_paths([prompt + completion])
    (chunk,) = pack_forest(forest, 8192)
    tgt = torch.as_tensor(idx[0][len(prompt):])
    with torch.no_grad():
        lp, _ = token_logprobs(model, chunk, tgt, torch.full((len(tgt),), temperature))
    return lp.numpy()


def one_update(trainer, prompt, completions, rewards):
    forest, idx = forest_from_paths([prompt + c for c in completions])
    n = len(forest)
    decision = np.zeros(n, bool)
    a_pos, a_neg, w = (np.zeros(n, np.float32) for _ in range(3))
    mean = float(np.mean(rewards))
    for ix, c, r in zip(idx, completions, rewards):
        sampled = ix[len(prompt):]
        decision[sampled] = True
        w[sampled] += 1.0
        (a_pos if r > mean else a_neg)[sampled] += r - mean
    batch = TrainBatch(forest=forest, decision=decision, temperature=np.ones(n, np.float32),
                       engine_logp=np.zeros(n, np.float32), adv_pos=a_pos, adv_neg=a_neg, weight=w,
                       tree_offsets=np.array([0, n]))
    return trainer.update(batch)


def test_vllm_logprobs_equal_trainer_after_sync():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harnessrl.engine.model import resolve_model
    from harnessrl.engine.vllm_engine import VLLMEngine

    model_dir = resolve_model(None)
    tok = AutoTokenizer.from_pretrained(model_dir)
    prompt = tok.apply_chat_template([{"role": "user", "content": "Name a fruit."}], add_generation_prompt=True,
                                     tokenize=True, return_dict=False)
    policy = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
    trainer = Trainer(policy, torch.optim.AdamW(policy.parameters(), lr=1e-4), PPOSettings(is_mode="none"),
                      token_budget=4096)
    engine = VLLMEngine(str(model_dir), dtype="float32", max_model_len=1024, max_num_seqs=4, kv_cache_gib=0.5)
    try:
        params = SamplingParams(temperature=1.0, max_tokens=12)
        gens = asyncio.run(_gather(engine, prompt, params, 2))
        one_update(trainer, list(prompt), [list(g.token_ids) for g in gens], [1.0, 0.0])
        trainer.sync_weights(engine, 1)
        assert engine.policy_version == 1
        fixed = asyncio.run(engine.generate(list(prompt), SamplingParams(temperature=0.8, max_tokens=16)))
        assert fixed.policy_version == 1
        ours = trainer_logprobs(trainer.policy, list(prompt), list(fixed.token_ids), 0.8)
        assert np.max(np.abs(ours - np.asarray(fixed.logprobs))) < 2e-3
        base = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
        old = trainer_logprobs(base, list(prompt), list(fixed.token_ids), 0.8)
        assert np.max(np.abs(old - np.asarray(fixed.logprobs))) > 1e-2  # the sync is what made them equal
    finally:
        engine.close()


async def _gather(engine, prompt, params, n):
    return await asyncio.gather(*(engine.generate(list(prompt), params) for _ in range(n)))
