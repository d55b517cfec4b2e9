"""Engine streams (engine/base.py `generate_stream`): the deltas concatenated are the final ids and
logprobs, the final Generation equals what `generate` returns, closing a stream early aborts its
request, and an engine that does not stream falls back to one item."""

from __future__ import annotations

import pytest

from harnessrl.engine.base import Generation, SamplingParams, TokenDelta, stream_generation
from harnessrl.engine.replicas import ReplicatedEngine
from harnessrl.engine.scripted import ScriptedEngine

GREEDY = SamplingParams(temperature=0.0, max_tokens=12)


async def _collect(items) -> tuple[list[TokenDelta], Generation]:
    out = [item async for item in items]
    *deltas, final = out
    assert all(isinstance(d, TokenDelta) for d in deltas) and isinstance(final, Generation)
    return deltas, final  # type: ignore[return-value]


def _joined(deltas: list[TokenDelta]) -> tuple[list[int], list[float]]:
    return [t for d in deltas for t in d.token_ids], [lp for d in deltas for lp in d.logprobs]


@pytest.fixture(scope="module")
def hf_engine(tmp_path_factory):
    from harnessrl.engine.hf import HFEngine
    from harnessrl.engine.model import make_tiny_model

    engine = HFEngine(str(make_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)), max_model_len=64,
                      num_threads=1)
    yield engine
    engine.close()


async def test_hf_stream_equals_generate(hf_engine):
    whole = await hf_engine.generate([1, 2000, 300, 400], GREEDY)
    deltas, final = await _collect(hf_engine.generate_stream([1, 2000, 300, 400], GREEDY))
    ids, logprobs = _joined(deltas)
    assert len(deltas) == len(final.token_ids) > 1  # one delta per sampled token
    assert ids == final.token_ids == whole.token_ids
    assert logprobs == final.logprobs and final.logprobs == pytest.approx(whole.logprobs, abs=1e-4)
    assert final.finish_reason == whole.finish_reason


async def test_hf_stream_closed_early_frees_the_engine(hf_engine):
    stream = hf_engine.generate_stream([1, 77], SamplingParams(temperature=0.0, max_tokens=40))
    first = await anext(stream)
    assert isinstance(first, TokenDelta)
    await stream.aclose()  # the request leaves the batch
    after = await hf_engine.generate([1, 77], GREEDY)
    assert after.token_ids[:1] == first.token_ids


async def test_scripted_and_replicated_streams():
    script = [[5, 6, 7, 8, 2]] * 2
    engine = ScriptedEngine(script, eos_ids=[2])
    deltas, final = await _collect(engine.generate_stream([1], SamplingParams(max_tokens=10)))
    assert _joined(deltas)[0] == final.token_ids == [5, 6, 7, 8, 2] and final.finish_reason == "stop"
    replicated = ReplicatedEngine([ScriptedEngine(script, eos_ids=[2])])
    deltas, final = await _collect(replicated.generate_stream([1], SamplingParams(max_tokens=3)))
    assert _joined(deltas)[0] == final.token_ids == [5, 6, 7] and final.timings["replica"] == 0.0


async def test_engine_without_stream_falls_back_to_one_item():
    class OneShot:
        model_path, max_model_len, policy_version = "x", 64, 0

        async def generate(self, prompt_ids, params):
            return Generation([3, 4], [-0.1, -0.2], "stop", 0)

    items = [item async for item in stream_generation(OneShot(), [1], GREEDY)]  # type: ignore[arg-type]
    assert items == [Generation([3, 4], [-0.1, -0.2], "stop", 0)]


def test_vllm_server_stream_chunks_are_parsed_as_deltas():
    from harnessrl.engine.base import EngineError
    from harnessrl.engine.vllm_server import _sse_data, _stream_choices

    acc = {"token_ids": [], "logprobs": {"token_logprobs": []}, "finish_reason": None}
    lines = ['data: {"choices": [{"token_ids": [5, 6], "logprobs": {"token_logprobs": [-0.1, -0.2]}}]}', "",
             'data: {"choices": [{"token_ids": [2], "logprobs": {"token_logprobs": [-0.3]}, "finish_reason": "stop"}]}',
             'data: {"choices": [], "usage": {"prompt_tokens": 3}}', "data: [DONE]"]
    deltas = [d for line in lines if (data := _sse_data(line)) is not None for d in _stream_choices(data, acc)]
    assert deltas == [TokenDelta([5, 6], [-0.1, -0.2]), TokenDelta([2], [-0.3])]
    assert acc == {"token_ids": [5, 6, 2], "logprobs": {"token_logprobs": [-0.1, -0.2, -0.3]}, "finish_reason": "stop"}
    with pytest.raises(EngineError):
        _sse_data('data: {"error": {"message": "boom"}}')
    with pytest.raises(EngineError):
        _stream_choices({"choices": [{"token_ids": [1], "logprobs": {"token_logprobs": []}}]}, acc)
