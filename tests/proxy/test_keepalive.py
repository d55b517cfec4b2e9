"""Slow streamed calls: the stream opens with keepalives, then carries the events, or the error
as an in-stream event; the SDKs read both."""

from __future__ import annotations

import asyncio

import anthropic
import httpx
import openai
import pytest

from harnessrl.engine.base import EngineOverloaded
from harnessrl.proxy.server import ProxyServer


@pytest.fixture
def slow_proxy(engine, store, renderer):
    original = engine.generate

    async def slow(prompt_ids, params):
        await asyncio.sleep(0.5)
        if engine.overloaded:
            raise EngineOverloaded("busy")
        return await original(prompt_ids, params)

    engine.generate = slow
    server = ProxyServer(engine, store, renderer, stream_keepalive_s=0.1).start()
    yield server
    server.stop()


def test_slow_stream_gets_keepalives_then_events(slow_proxy, engine, store):
    engine.replies.extend(["slow hello", "slow chat", "slow resp"])
    r = httpx.post(slow_proxy.base_urls()["anthropic"] + "/v1/messages", timeout=30,
                   json={"max_tokens": 20, "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200 and r.text.startswith("event: ping")
    assert r.text.count("event: ping") >= 2 and "message_stop" in r.text
    oa = openai.OpenAI(base_url=slow_proxy.base_urls()["openai"], api_key="x", max_retries=0)
    text = "".join(c.choices[0].delta.content or "" for c in oa.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True) if c.choices)
    assert text == "slow chat"
    with oa.responses.stream(model="m", input="hi") as s:
        assert s.get_final_response().output_text == "slow resp"
    assert [c.status for c in store.list_calls()] == ["ok"] * 3


def test_slow_stream_error_is_an_in_stream_event(slow_proxy, engine, store):
    engine.overloaded = True
    an = anthropic.Anthropic(base_url=slow_proxy.base_urls()["anthropic"], api_key="x", max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as exc:
        with an.messages.stream(model="m", max_tokens=20, messages=[{"role": "user", "content": "hi"}]) as s:
            s.get_final_message()
    assert "overloaded" in str(exc.value)
    oa = openai.OpenAI(base_url=slow_proxy.base_urls()["openai"], api_key="x", max_retries=0)
    with pytest.raises(openai.APIError) as exc2:
        list(oa.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=True))
    assert "overloaded" in str(exc2.value)
    assert [c.status for c in store.list_calls()] == ["error", "error"]


def test_slow_non_stream_call_is_a_plain_response(slow_proxy, engine):
    engine.replies.append("patient")
    r = httpx.post(slow_proxy.base_urls()["openai"] + "/chat/completions", timeout=30,
                   json={"messages": [{"role": "user", "content": "hi"}]})
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "patient"
