"""Real streaming from the real HFEngine (SmolLM2-135M-Instruct) through the proxy and the `openai`
SDK (marker: model): content deltas arrive while the call is not yet stored (it is stored before
the last byte), and they concatenate to the final text and the stored text."""

from __future__ import annotations

import openai
import pytest

from harnessrl.proxy.server import ProxyServer

pytestmark = pytest.mark.model


def test_hf_engine_streams_through_the_proxy(store):
    from harnessrl.engine.hf import HFEngine
    from harnessrl.engine.model import resolve_model

    model = resolve_model(None)
    engine = HFEngine(str(model), max_model_len=2048, num_threads=2)
    try:
        with ProxyServer(engine, store, model) as server:
            key = server.register_rollout("real")
            client = openai.OpenAI(base_url=server.base_urls(key)["openai"], api_key="x", max_retries=0)
            deltas: list[str] = []
            stored_at_delta: list[int] = []
            for chunk in client.chat.completions.create(
                    model="m", max_tokens=24, temperature=0, stream=True,
                    messages=[{"role": "user", "content": "Name three colours, in one sentence."}]):
                if chunk.choices and chunk.choices[0].delta.content:
                    deltas.append(chunk.choices[0].delta.content)
                    stored_at_delta.append(len(store.list_call_summaries()))
    finally:
        engine.close()
    [call] = store.list_calls(["real"], include_raw=True)
    assert len(deltas) > 1 and stored_at_delta[:2] == [0, 0]  # two deltas before the call was complete
    assert "".join(deltas) == call.response["choices"][0]["message"]["content"]
    assert len(call.sampled_ids) == len(call.logprobs) and call.meta["timings"]["first_token_s"] > 0
