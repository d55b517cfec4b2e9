"""HFEngine on a tiny random model: batching is exact, logprobs follow the convention, limits hold."""

from __future__ import annotations

import asyncio

import pytest
import torch

from harnessrl.engine.base import EngineOverloaded, PromptTooLong, SamplingParams
from harnessrl.engine.hf import HFEngine

PROMPTS = [[1, 2000, 300, 400], [1, 77], [1, 5000, 6000, 7000, 8000, 9000], [1, 42, 43], [1, 12345]]
GREEDY = SamplingParams(temperature=0.0, max_tokens=10)


@pytest.fixture(scope="module")
def engine(tiny_model_dir):
    eng = HFEngine(str(tiny_model_dir), max_model_len=64, max_batch=8, max_pending=64)
    yield eng
    eng.close()


def manual_logprobs(model, prompt: list[int], completion: list[int], temperature: float) -> torch.Tensor:
    with torch.no_grad():
        logits = model(torch.tensor([prompt + completion])).logits[0, len(prompt) - 1 : -1]
    scale = temperature if temperature > 0 else 1.0
    logp = torch.log_softmax(logits / scale, dim=-1)
    return logp.gather(-1, torch.tensor(completion)[:, None])[:, 0]


async def test_batched_greedy_equals_unbatched(engine):
    alone = [await engine.generate(p, GREEDY) for p in PROMPTS]
    together = await asyncio.gather(*(engine.generate(p, GREEDY) for p in PROMPTS))
    for a, b in zip(alone, together):
        assert a.token_ids == b.token_ids
        assert a.logprobs == pytest.approx(b.logprobs, abs=1e-4)
    assert len({tuple(g.token_ids) for g in alone}) == len(PROMPTS)  # the tiny model is not degenerate


async def test_request_joining_mid_batch_is_exact(engine):
    long_params = SamplingParams(temperature=0.0, max_tokens=30)
    alone_long = await engine.generate(PROMPTS[2], long_params)
    alone_short = await engine.generate(PROMPTS[0], GREEDY)

    async def late_short():
        await asyncio.sleep(0.05)
        return await engine.generate(PROMPTS[0], GREEDY)

    mixed_long, mixed_short = await asyncio.gather(engine.generate(PROMPTS[2], long_params), late_short())
    assert mixed_long.token_ids == alone_long.token_ids
    assert mixed_short.token_ids == alone_short.token_ids


@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.3])
async def test_logprobs_match_manual_forward(engine, tiny_hf_model, temperature):
    params = SamplingParams(temperature=temperature, max_tokens=12, seed=11)
    gens = await asyncio.gather(*(engine.generate(p, params) for p in PROMPTS[:3]))
    for prompt, gen in zip(PROMPTS, gens):
        expected = manual_logprobs(tiny_hf_model, prompt, gen.token_ids, temperature)
        assert torch.allclose(torch.tensor(gen.logprobs), expected, atol=1e-4)
        assert len(gen.logprobs) == len(gen.token_ids) == 12
        assert gen.finish_reason == "length"


async def test_seed_reproducible_and_seeds_differ(engine):
    params = SamplingParams(temperature=1.0, max_tokens=16, seed=3)
    a, b = await asyncio.gather(engine.generate(PROMPTS[0], params), engine.generate(PROMPTS[0], params))
    other = await engine.generate(PROMPTS[0], SamplingParams(temperature=1.0, max_tokens=16, seed=4))
    assert a.token_ids == b.token_ids
    assert other.token_ids != a.token_ids


async def test_top_p_restricts_to_the_nucleus(engine, tiny_hf_model):
    params = SamplingParams(temperature=1.0, top_p=1e-6, max_tokens=8, seed=1)  # nucleus = argmax only
    sampled = await engine.generate(PROMPTS[1], params)
    greedy = await engine.generate(PROMPTS[1], SamplingParams(temperature=0.0, max_tokens=8))
    assert sampled.token_ids == greedy.token_ids


async def test_stop_token_ends_with_stop_and_is_included(engine):
    greedy = await engine.generate(PROMPTS[0], GREEDY)
    stop_at = greedy.token_ids[3]
    first = greedy.token_ids.index(stop_at)
    gen = await engine.generate(
        PROMPTS[0], SamplingParams(temperature=0.0, max_tokens=10, stop_token_ids=(stop_at,))
    )
    assert gen.finish_reason == "stop"
    assert gen.token_ids == greedy.token_ids[: first + 1]


async def test_prompt_too_long_and_max_tokens_clamped(engine):
    with pytest.raises(PromptTooLong) as err:
        await engine.generate(list(range(1, 65)), GREEDY)
    assert err.value.prompt_tokens == 64 and err.value.max_model_len == 64
    gen = await engine.generate(list(range(1, 61)), SamplingParams(temperature=0.0, max_tokens=100))
    assert len(gen.token_ids) == 4 and gen.finish_reason == "length"


async def test_bad_input_is_a_value_error(engine):
    with pytest.raises(ValueError):
        await engine.generate([], GREEDY)
    with pytest.raises(ValueError):
        await engine.generate([1, 10**9], GREEDY)
    with pytest.raises(ValueError):
        await engine.generate([1], SamplingParams(temperature=-1.0))


async def test_overload_when_too_many_wait(tiny_model_dir):
    eng = HFEngine(str(tiny_model_dir), max_model_len=64, max_batch=1, max_pending=2)
    try:
        params = SamplingParams(temperature=0.0, max_tokens=40)
        results = await asyncio.gather(
            *(eng.generate([1, 2, 3], params) for _ in range(8)), return_exceptions=True
        )
        overloaded = [r for r in results if isinstance(r, EngineOverloaded)]
        done = [r for r in results if not isinstance(r, BaseException)]
        assert overloaded and done
        assert len(overloaded) + len(done) == 8
    finally:
        eng.close()


async def test_update_weights_changes_outputs_and_version(tiny_model_dir, tiny_hf_model):
    eng = HFEngine(str(tiny_model_dir), max_model_len=64)
    try:
        before = await eng.generate(PROMPTS[0], GREEDY)
        assert before.policy_version == 0
        gen = torch.Generator().manual_seed(0)
        new = {
            k: v + 0.3 * torch.randn(v.shape, generator=gen)
            for k, v in tiny_hf_model.state_dict().items()
            if k.endswith("proj.weight")
        }
        eng.update_weights(new.items(), version=7)
        assert eng.policy_version == 7
        after = await eng.generate(PROMPTS[0], GREEDY)
        assert after.policy_version == 7
        assert after.token_ids != before.token_ids
        model = type(tiny_hf_model).from_pretrained(tiny_model_dir, dtype=torch.float32).eval()
        model.load_state_dict(new, strict=False)
        expected = manual_logprobs(model, PROMPTS[0], after.token_ids, 0.0)
        assert torch.allclose(torch.tensor(after.logprobs), expected, atol=1e-4)
        with pytest.raises(KeyError):
            eng.update_weights([("no.such.weight", torch.zeros(1))], version=8)
    finally:
        eng.close()


async def test_closed_engine_refuses(tiny_model_dir):
    from harnessrl.engine.base import EngineError

    eng = HFEngine(str(tiny_model_dir), max_model_len=64)
    eng.close()
    with pytest.raises(EngineError):
        await eng.generate([1, 2], GREEDY)
