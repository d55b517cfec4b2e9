"""Real streaming through the proxy with the real SDKs, one test per protocol: the engine streams
its reply token by token and stops halfway at a gate that only the client opens, once it has
received two content deltas; so those deltas provably left before the reply was complete. The
concatenated deltas equal the final text and the stored response's text, the stored ids are the
sampled ids, and the stored response equals what the same call stores unstreamed."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any, AsyncIterator

import anthropic
import httpx
import openai
import pytest

from harnessrl.engine.base import Generation, SamplingParams, StreamItem, TokenDelta
from harnessrl.proxy.server import ProxyServer

from .fakes import TextScriptEngine
from .helpers import tool_call_text

TEXT = "Streaming works: ü, 日本語 and 🎉 arrive whole, one piece at a time."
GATE_AFTER = 12  # tokens sampled before the engine waits for the client


class GatedStreamEngine(TextScriptEngine):
    """Streams the scripted reply one token at a time; before token GATE_AFTER it waits (at most
    30 s) until the test opens `gate`. `opened` records whether the client opened it in time."""

    def __init__(self, encode: Any, eot_id: int):
        super().__init__(encode, eot_id)
        self.gate = threading.Event()
        self.opened: list[bool] = []

    async def generate_stream(self, prompt_ids: list[int], params: SamplingParams) -> AsyncIterator[StreamItem]:
        gen: Generation = await self.generate(prompt_ids, params)
        for i, (token, logprob) in enumerate(zip(gen.token_ids, gen.logprobs)):
            if i == GATE_AFTER:
                self.opened.append(await asyncio.to_thread(self.gate.wait, 30))
            yield TokenDelta([token], [logprob])
        yield gen


@pytest.fixture
def gated(renderer):
    return GatedStreamEngine(renderer.encode, renderer.eot_id)


@pytest.fixture
def server(gated, store, renderer):
    with ProxyServer(gated, store, renderer) as proxy:
        yield proxy


def _seen(engine: GatedStreamEngine, deltas: list[str]) -> None:
    if len(deltas) >= 2:
        engine.gate.set()


def _check(engine: GatedStreamEngine, store, renderer, rollout: str, deltas: list[str], final: str,
           stored_text: Any) -> None:
    assert engine.opened == [True], "the client got no two deltas before the reply was complete"
    assert len(deltas) > 2 and "".join(deltas) == final == TEXT
    [call] = store.list_calls([rollout], include_raw=True)
    assert stored_text(call.response) == TEXT and call.status == "ok" and call.meta["stream"] is True
    assert call.sampled_ids == list(renderer.encode(TEXT)) + [renderer.eot_id]  # token truth
    assert call.meta["timings"]["first_token_s"] <= call.meta["timings"]["engine_s"]


def _unstreamed_response(server, engine, store, rollout: str, send) -> dict:
    """What the same call stores when it is not streamed (the call id and time differ)."""
    engine.gate.set()
    engine.replies.append(TEXT)
    send(server.base_urls(server.register_rollout(rollout)))
    [call] = store.list_calls([rollout], include_raw=True)
    return call.response


def _same_response(a: dict, b: dict, *volatile: str) -> None:
    strip = lambda d: {k: v for k, v in d.items() if k not in volatile}  # noqa: E731
    assert strip(a) == strip(b)


def test_openai_chat_streams_deltas(server, gated, store, renderer):
    gated.replies.append(TEXT)
    client = openai.OpenAI(base_url=server.base_urls(server.register_rollout("chat"))["openai"], api_key="x",
                           max_retries=0)
    deltas: list[str] = []
    msgs = [{"role": "user", "content": "Hi"}]
    for chunk in client.chat.completions.create(model="m", messages=msgs, stream=True):
        if chunk.choices and chunk.choices[0].delta.content:
            deltas.append(chunk.choices[0].delta.content)
            _seen(gated, deltas)
    _check(gated, store, renderer, "chat", deltas, "".join(deltas), lambda r: r["choices"][0]["message"]["content"])
    unstreamed = _unstreamed_response(server, gated, store, "chat-whole", lambda urls: openai.OpenAI(
        base_url=urls["openai"], api_key="x", max_retries=0).chat.completions.create(model="m", messages=msgs))
    _same_response(store.list_calls(["chat"], include_raw=True)[0].response, unstreamed, "id", "created")


def test_anthropic_streams_deltas(server, gated, store, renderer):
    gated.replies.append(TEXT)
    client = anthropic.Anthropic(base_url=server.base_urls(server.register_rollout("an"))["anthropic"], api_key="x",
                                 max_retries=0)
    deltas: list[str] = []
    msgs = [{"role": "user", "content": "Hi"}]
    with client.messages.stream(model="m", max_tokens=100, messages=msgs) as s:
        for ev in s:
            if ev.type == "content_block_delta" and ev.delta.type == "text_delta":
                deltas.append(ev.delta.text)
                _seen(gated, deltas)
        final = s.get_final_message()
    _check(gated, store, renderer, "an", deltas, final.content[0].text, lambda r: r["content"][0]["text"])
    unstreamed = _unstreamed_response(server, gated, store, "an-whole", lambda urls: anthropic.Anthropic(
        base_url=urls["anthropic"], api_key="x", max_retries=0).messages.create(model="m", max_tokens=100,
                                                                                messages=msgs))
    _same_response(store.list_calls(["an"], include_raw=True)[0].response, unstreamed, "id")


def test_responses_streams_deltas(server, gated, store, renderer):
    gated.replies.append(TEXT)
    client = openai.OpenAI(base_url=server.base_urls(server.register_rollout("resp"))["responses"], api_key="x",
                           max_retries=0)
    deltas: list[str] = []
    with client.responses.stream(model="m", input="Hi") as s:
        for ev in s:
            if ev.type == "response.output_text.delta":
                deltas.append(ev.delta)
                _seen(gated, deltas)
        final = s.get_final_response()
    _check(gated, store, renderer, "resp", deltas, final.output_text, lambda r: r["output"][0]["content"][0]["text"])


def test_gemini_streams_deltas(server, gated, store, renderer):
    gated.replies.append(TEXT)
    url = server.base_urls(server.register_rollout("gem"))["gemini"] + "/v1beta/models/g:streamGenerateContent?alt=sse"
    deltas: list[str] = []
    body = {"contents": [{"role": "user", "parts": [{"text": "Hi"}]}]}
    with httpx.Client(timeout=60) as http, http.stream("POST", url, json=body) as r:
        assert r.status_code == 200
        chunks = []
        for line in r.iter_lines():
            if line.startswith("data:"):
                chunks.append(json.loads(line[len("data:"):]))
                deltas += [p["text"] for p in chunks[-1]["candidates"][0]["content"]["parts"] if p.get("text")]
                _seen(gated, deltas)
    assert chunks[-1]["candidates"][0]["finishReason"] == "STOP"
    assert all("finishReason" not in c["candidates"][0] for c in chunks[:-1])
    _check(gated, store, renderer, "gem", deltas, "".join(deltas),
           lambda r: r["candidates"][0]["content"]["parts"][0]["text"])


def test_tool_call_after_streamed_text(server, gated, store, renderer):
    """Text streams until the tool call's start marker; the call itself comes whole at the end."""
    gated.gate.set()
    gated.replies.append("I will list the files now, then read them.\n" + tool_call_text(("bash", {"command": "ls"})))
    client = openai.OpenAI(base_url=server.base_urls(server.register_rollout("tool"))["openai"], api_key="x",
                           max_retries=0)
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}}}}}]
    deltas, args, finish = [], "", None
    for chunk in client.chat.completions.create(model="m", messages=[{"role": "user", "content": "ls"}], tools=tools,
                                                stream=True):
        delta = chunk.choices[0].delta if chunk.choices else None
        if delta is not None and delta.content:
            assert not args, "text after the tool call"
            deltas.append(delta.content)
        for tc in (delta.tool_calls or []) if delta is not None else []:
            args += tc.function.arguments or ""
        finish = (chunk.choices[0].finish_reason if chunk.choices else None) or finish
    assert len(deltas) > 2 and "".join(deltas) == "I will list the files now, then read them."
    assert json.loads(args) == {"command": "ls"} and finish == "tool_calls"
    [call] = store.list_calls(["tool"], include_raw=True)
    assert call.response["choices"][0]["message"]["content"] == "".join(deltas)


def test_reasoning_then_streamed_text_keep_their_order(server, gated, store):
    """The thinking block / reasoning item comes whole and first, the text after it in pieces; the
    SDKs assemble the same message the store keeps."""
    gated.gate.set()
    reply = "<think>plan the answer</think>The answer comes in several small pieces."
    gated.replies.extend([reply, reply])
    urls = server.base_urls(server.register_rollout("think"))
    an = anthropic.Anthropic(base_url=urls["anthropic"], api_key="x", max_retries=0)
    with an.messages.stream(model="m", max_tokens=100, messages=[{"role": "user", "content": "Hi"}]) as s:
        kinds = [(ev.type, getattr(ev, "index", None)) for ev in s]
        message = s.get_final_message()
    assert [b.type for b in message.content] == ["thinking", "text"]
    assert message.content[0].thinking == "plan the answer"
    assert kinds.count(("content_block_delta", 1)) > 2  # the text block's pieces
    oa = openai.OpenAI(base_url=urls["responses"], api_key="x", max_retries=0)
    with oa.responses.stream(model="m", input="Hi") as s:
        deltas = [ev.delta for ev in s if ev.type == "response.output_text.delta"]
        response = s.get_final_response()
    assert [o.type for o in response.output] == ["reasoning", "message"] and len(deltas) > 2
    stored = [c.response for c in store.list_calls(["think"], include_raw=True)]
    text = "The answer comes in several small pieces."
    assert message.content[1].text == stored[0]["content"][1]["text"] == text
    assert "".join(deltas) == response.output_text == text
    assert [o["type"] for o in stored[1]["output"]] == ["reasoning", "message"]
