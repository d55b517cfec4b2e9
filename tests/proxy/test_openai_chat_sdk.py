"""The real `openai` SDK (Chat Completions) against the real proxy."""

from __future__ import annotations

import json

import openai
import pytest

from .helpers import assert_call_ok, assert_prefix_chain, tool_call_text

TOOLS = [
    {"type": "function", "function": {"name": "bash", "description": "Run a command",
                                      "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "read", "description": "Read a file",
                                      "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}},
]


@pytest.fixture
def client(proxy):
    key = proxy.register_rollout("rollout-o")
    return openai.OpenAI(base_url=proxy.base_urls(key)["openai"], api_key="unused", max_retries=0)


def collect_stream(stream) -> tuple[str, list[dict], str | None, object]:
    """Assemble a streamed chat completion the way harnesses do."""
    text, calls, finish, usage = "", {}, None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            delta = choice.delta
            text += delta.content or ""
            for tc in delta.tool_calls or []:
                slot = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
                slot["id"] = tc.id or slot["id"]
                if tc.function is not None:
                    slot["name"] += tc.function.name or ""
                    slot["arguments"] += tc.function.arguments or ""
            finish = choice.finish_reason or finish
    return text, [calls[i] for i in sorted(calls)], finish, usage


@pytest.mark.parametrize("stream", [False, True])
def test_multi_turn_tools(client, engine, store, stream):
    engine.replies.extend([
        tool_call_text(("bash", {"command": "ls"})),
        tool_call_text(("read", {"path": "a.txt"}), ("bash", {"command": "cat b.txt"})),
        "The answer is 42.",
    ])
    messages: list[dict] = [{"role": "system", "content": "You are an agent."},
                            {"role": "user", "content": "Find the answer."}]
    for turn in range(3):
        kwargs = dict(model="gpt-x", messages=messages, tools=TOOLS, max_completion_tokens=200)
        if stream:
            text, calls, finish, usage = collect_stream(client.chat.completions.create(
                **kwargs, stream=True, stream_options={"include_usage": True}))
            assert usage is not None and usage.prompt_tokens > 0
        else:
            resp = client.chat.completions.create(**kwargs)
            msg, finish = resp.choices[0].message, resp.choices[0].finish_reason
            text = msg.content or ""
            calls = [{"id": t.id, "name": t.function.name, "arguments": t.function.arguments} for t in msg.tool_calls or []]
            assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens
        if turn < 2:
            assert finish == "tool_calls"
        expected = [[("bash", {"command": "ls"})], [("read", {"path": "a.txt"}), ("bash", {"command": "cat b.txt"})], []]
        assert [(c["name"], json.loads(c["arguments"])) for c in calls] == expected[turn]
        if turn == 2:
            assert finish == "stop" and text == "The answer is 42."
        # resend like OpenClaw: ids stripped of non-alphanumerics, compact arguments, content None
        assistant = {"role": "assistant", "content": text or None}
        if calls:
            assistant["tool_calls"] = [
                {"id": c["id"].replace("_", ""), "type": "function",
                 "function": {"name": c["name"], "arguments": json.dumps(json.loads(c["arguments"]), separators=(",", ":"))}}
                for c in calls]
        messages.append(assistant)
        messages += [{"role": "tool", "tool_call_id": c["id"].replace("_", ""), "content": f"result {i}"}
                     for i, c in enumerate(calls)]
    records = store.list_calls(["rollout-o"], include_raw=True)
    assert [c.seq for c in records] == [0, 1, 2]
    for c in records:
        assert_call_ok(c)
        assert c.protocol == "openai.chat" and c.meta["sampling"]["max_tokens"] == 200
        assert c.meta["n_reused"] == sum(1 for p in c.prompt_provenance if p >= 0)
    assert_prefix_chain(records)
    assert records[-1].response["choices"][0]["message"]["content"] == "The answer is 42."


def test_sampling_params_recorded(client, engine, store):
    engine.replies.append("x")
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], temperature=0.6,
                                   top_p=0.9, max_tokens=33, stop=["<|im_end|>"], seed=5)
    (call,) = store.list_calls()
    assert (call.temperature, call.top_p) == (0.6, pytest.approx(0.9))
    params = engine.seen[0][1]
    assert params.max_tokens == 33 and params.seed is None  # a client seed is never forwarded
    assert call.meta["sampling"]["stop_token_ids"] == list(params.stop_token_ids)


def test_defaults_and_length_finish(client, engine, store):
    engine.replies.append("one two three four five six seven eight nine ten")
    resp = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "count"}], max_tokens=3)
    assert resp.choices[0].finish_reason == "length" and resp.usage.completion_tokens == 3
    (call,) = store.list_calls()
    assert call.finish_reason == "length" and call.temperature == 1.0 and call.top_p == 1.0
    assert len(call.sampled_ids) == 3


def test_models_list(client, proxy):
    assert [m.id for m in client.models.list()] == [proxy.served_model]
