"""The real HFEngine serving SmolLM2-135M-Instruct through the proxy (marker: model)."""

from __future__ import annotations

import pytest

from .helpers import check_two_sdk_turns

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def hf_engine():
    from harnessrl.engine.hf import HFEngine
    from harnessrl.engine.model import resolve_model

    engine = HFEngine(str(resolve_model(None)), max_model_len=2048, num_threads=2)
    yield engine
    engine.close()


def test_smollm2_through_the_proxy(hf_engine, store):
    check_two_sdk_turns(hf_engine, store, "real-1")


def test_multi_token_stop_string_with_the_real_engine(hf_engine, store, renderer):
    """Greedy SmolLM2 twice on one prompt: without a stop, then with a multi-token stop string taken
    from the middle of that reply. The second call's ids are the first's, cut at the token that
    completed the stop; its text ends before the stop (the rule of proxy/serving.py)."""
    import httpx

    from harnessrl.proxy.server import ProxyServer

    server = ProxyServer(hf_engine, store, renderer).start()
    try:
        url = f"{server.base_urls(server.register_rollout('stop'))['openai']}/chat/completions"
        body = {"model": "m", "temperature": 0, "max_tokens": 48,
                "messages": [{"role": "user", "content": "List three colours, one per line."}]}
        first = httpx.post(url, json=body, timeout=300).json()["choices"][0]["message"]["content"]
        free = store.list_calls(["stop"])[0].sampled_ids
        words = [w for w in first.split() if len(renderer.encode(w)) > 1]
        assert words, first
        stop = words[len(words) // 2]
        cut = httpx.post(url, json={**body, "stop": [stop]}, timeout=300).json()["choices"][0]
    finally:
        server.stop()
    call = store.list_calls(["stop"])[1]
    k = len(call.sampled_ids)
    assert call.sampled_ids == free[:k] and len(call.logprobs) == k and call.finish_reason == "stop"
    assert stop in renderer.decode(call.sampled_ids) and stop not in renderer.decode(call.sampled_ids[:-1])
    assert cut["finish_reason"] == "stop" and cut["message"]["content"] == first[:first.index(stop)].rstrip()
