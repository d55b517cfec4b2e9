"""ScriptedEngine and FixedLatencyEngine follow the Engine protocol without a model."""

from __future__ import annotations

import pytest

from harnessrl.engine.base import Engine, EngineError, PromptTooLong, SamplingParams
from harnessrl.engine.scripted import FixedLatencyEngine, ScriptedEngine


async def test_outputs_consumed_in_order_then_exhausted():
    eng = ScriptedEngine([[5, 6, 7], [8]], eos_ids=(2,))
    assert isinstance(eng, Engine)
    first = await eng.generate([1], SamplingParams())
    second = await eng.generate([1, 2], SamplingParams())
    assert (first.token_ids, first.finish_reason) == ([5, 6, 7], "stop")
    assert second.token_ids == [8]
    assert first.logprobs == [-0.5] * 3
    assert [c[0] for c in eng.calls] == [[1], [1, 2]]
    with pytest.raises(EngineError):
        await eng.generate([1], SamplingParams())


async def test_stop_ids_and_max_tokens_cut_the_script():
    eng = ScriptedEngine(lambda prompt: [10, 11, 2, 12, 13], eos_ids=(2,))
    stopped = await eng.generate([1], SamplingParams())
    cut = await eng.generate([1], SamplingParams(max_tokens=2))
    custom = await eng.generate([1], SamplingParams(stop_token_ids=(11,)))
    assert (stopped.token_ids, stopped.finish_reason) == ([10, 11, 2], "stop")
    assert (cut.token_ids, cut.finish_reason) == ([10, 11], "length")
    assert (custom.token_ids, custom.finish_reason) == ([10, 11], "stop")


async def test_callable_sees_prompt_and_limits_apply():
    eng = ScriptedEngine(lambda prompt: [len(prompt)], max_model_len=4)
    assert (await eng.generate([1, 2, 3], SamplingParams())).token_ids == [3]
    with pytest.raises(PromptTooLong):
        await eng.generate([1, 2, 3, 4], SamplingParams())
    eng.update_weights([], version=3)
    assert (await eng.generate([1], SamplingParams())).policy_version == 3


async def test_fixed_latency_engine():
    eng = FixedLatencyEngine(0.001, n_tokens=5, token_ids=(7, 8))
    gen = await eng.generate([1, 2], SamplingParams())
    assert gen.token_ids == [7, 8, 7, 8, 7] and gen.finish_reason == "stop"
    short = await eng.generate([1, 2], SamplingParams(max_tokens=3))
    assert short.token_ids == [7, 8, 7] and short.finish_reason == "length"
    with pytest.raises(ValueError):
        await eng.generate([], SamplingParams())
