"""The real `openai` SDK (Responses API) against the real proxy: the Codex CLI wire protocol."""

from __future__ import annotations

import json

import openai
import pytest

from .helpers import assert_call_ok, assert_prefix_chain, tool_call_text

TOOLS = [
    {"type": "function", "name": "exec_command", "description": "Run a command", "strict": False,
     "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}},
    {"type": "custom", "name": "apply_patch", "description": "Apply a patch",
     "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
]


@pytest.fixture
def client(proxy):
    key = proxy.register_rollout("rollout-r")
    return openai.OpenAI(base_url=proxy.base_urls(key)["responses"], api_key="unused", max_retries=0)


def resend(item) -> dict:
    """An output item as Codex resends it: keys reordered, reasoning content nulled."""
    d = item.model_dump(exclude_none=True)
    if d["type"] == "reasoning":
        d["content"] = None
    return dict(reversed(list(d.items())))


@pytest.mark.parametrize("stream", [False, True])
def test_multi_turn_function_and_custom_calls(client, engine, store, stream):
    engine.replies.extend([
        "<think>look first</think>" + tool_call_text(("exec_command", {"cmd": "ls"}), ("exec_command", {"cmd": "pwd"})),
        tool_call_text(("apply_patch", {"input": "*** Begin Patch\n*** End Patch"})),
        "Patched.",
    ])
    inputs: list[dict] = [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
                          {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Fix it."}]}]
    for turn in range(3):
        kwargs = dict(model="m", input=inputs, tools=TOOLS, tool_choice="auto", parallel_tool_calls=True, store=False,
                      include=["reasoning.encrypted_content"])
        if stream:
            with client.responses.stream(**kwargs) as s:
                kinds = [e.type for e in s]
                resp = s.get_final_response()
            assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
            assert "response.output_item.added" in kinds and "response.output_item.done" in kinds
        else:
            resp = client.responses.create(**kwargs)
        assert resp.status == "completed"
        types = [o.type for o in resp.output]
        if turn == 0:
            assert types == ["reasoning", "function_call", "function_call"]
            assert [json.loads(o.arguments) for o in resp.output[1:]] == [{"cmd": "ls"}, {"cmd": "pwd"}]
        elif turn == 1:
            assert types == ["custom_tool_call"] and resp.output[0].input == "*** Begin Patch\n*** End Patch"
        else:
            assert types == ["message"] and resp.output_text == "Patched."
        inputs += [resend(o) for o in resp.output]
        for o in resp.output:
            if o.type == "function_call":
                inputs.append({"type": "function_call_output", "call_id": o.call_id, "output": "ok"})
            elif o.type == "custom_tool_call":
                inputs.append({"type": "custom_tool_call_output", "call_id": o.call_id, "output": "applied"})
    records = store.list_calls(["rollout-r"], include_raw=True)
    for c in records:
        assert_call_ok(c)
        assert c.protocol == "openai.responses"
    assert_prefix_chain(records)
    assert records[0].response["output"][0]["type"] == "reasoning"


def test_string_input_and_instructions(client, engine, store, renderer):
    engine.replies.append("hello")
    resp = client.responses.create(model="m", input="say hello", instructions="Be nice.", max_output_tokens=20)
    assert resp.output_text == "hello" and resp.usage.output_tokens == 2
    (call,) = store.list_calls()
    assert call.meta["sampling"]["max_tokens"] == 20
    assert "Be nice." in renderer.decode(call.prompt_ids)


def test_incomplete_on_length(client, engine):
    engine.replies.append("a b c d e f g h")
    resp = client.responses.create(model="m", input="go", max_output_tokens=2)
    assert resp.status == "incomplete" and resp.incomplete_details.reason == "max_output_tokens"


def test_empty_reply_is_one_empty_message(client, engine):
    engine.replies.append("")
    resp = client.responses.create(model="m", input="say nothing")
    assert [o.type for o in resp.output] == ["message"] and resp.output_text == ""
