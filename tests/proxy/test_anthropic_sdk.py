"""The real `anthropic` SDK against the real proxy (scripted engine, real renderer and tokenizer)."""

from __future__ import annotations

import anthropic
import httpx
import pytest

from .helpers import assert_call_ok, assert_prefix_chain, tool_call_text

TOOLS = [
    {"name": "Bash", "description": "Run a shell command", "cache_control": {"type": "ephemeral"},
     "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}},
    {"name": "Read", "description": "Read a file",
     "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
]
SYSTEM = [{"type": "text", "text": "You are a coding agent."},
          {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]


@pytest.fixture
def client(proxy):
    key = proxy.register_rollout("rollout-a")
    return anthropic.Anthropic(base_url=proxy.base_urls(key)["anthropic"], api_key="unused", max_retries=0)


def blocks_as_params(content) -> list[dict]:
    return [b.model_dump(exclude_none=True, exclude={"caller", "citations"}) for b in content]


@pytest.mark.parametrize("stream", [False, True])
def test_multi_turn_tools(client, engine, store, stream):
    engine.replies.extend([
        tool_call_text(("Bash", {"command": "ls"})),
        tool_call_text(("Read", {"path": "a.txt"}), ("Bash", {"command": "wc -l a.txt"})),
        "All done: a.txt has 3 lines.",
    ])
    messages: list[dict] = [{"role": "user", "content": "How many lines in a.txt?"}]
    for turn in range(3):
        kwargs = dict(model="claude-opus-5-5", max_tokens=256, system=SYSTEM, tools=TOOLS, messages=messages)
        if stream:
            with client.messages.stream(**kwargs) as s:
                msg = s.get_final_message()
        else:
            msg = client.messages.create(**kwargs)
        uses = [b for b in msg.content if b.type == "tool_use"]
        if turn == 0:
            assert msg.stop_reason == "tool_use" and [(u.name, u.input) for u in uses] == [("Bash", {"command": "ls"})]
        elif turn == 1:
            assert [(u.name, u.input) for u in uses] == [("Read", {"path": "a.txt"}), ("Bash", {"command": "wc -l a.txt"})]
            assert len({u.id for u in uses}) == 2
        else:
            assert msg.stop_reason == "end_turn" and msg.content[0].text == "All done: a.txt has 3 lines."
        assert msg.usage.input_tokens > 0 and msg.usage.output_tokens > 0
        # resend the reply the way Claude Code does: tool input re-serialised, results as tool_result blocks
        messages.append({"role": "assistant", "content": blocks_as_params(msg.content)})
        if uses:
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": u.id, "content": f"output {i}", "is_error": False}
                for i, u in enumerate(uses)]})
    calls = store.list_calls(["rollout-a"], include_raw=True)
    assert [c.seq for c in calls] == [0, 1, 2]
    for c in calls:
        assert_call_ok(c)
        assert c.protocol == "anthropic.messages" and c.policy_version == 0
        assert c.request["model"] == "claude-opus-5-5" and c.response["type"] == "message"
        assert c.meta["stream"] is stream
    assert_prefix_chain(calls)
    # the engine saw exactly the stored prompt ids
    assert [ids for ids, _ in engine.seen] == [c.prompt_ids for c in calls]


def test_policy_version_and_provenance(client, engine, store):
    engine.replies.extend(["first", "second"])
    first = client.messages.create(model="m", max_tokens=50, messages=[{"role": "user", "content": "one"}])
    engine.set_version(7)
    client.messages.create(model="m", max_tokens=50, messages=[
        {"role": "user", "content": "one"}, {"role": "assistant", "content": first.content[0].text},
        {"role": "user", "content": "two"}])
    c0, c1 = store.list_calls()
    assert (c0.policy_version, c1.policy_version) == (0, 7)
    assert_prefix_chain([c0, c1])
    assert 0 in c1.prompt_provenance and 7 not in c1.prompt_provenance


def test_thinking_signature_round_trip(client, engine, store):
    engine.replies.extend(["<think>\nplan: list files\n</think>\n\nI will list them.", "Done."])
    msg = client.messages.create(model="m", max_tokens=100, messages=[{"role": "user", "content": "go"}],
                                 thinking={"type": "enabled", "budget_tokens": 1024})
    thinking, text = msg.content
    assert thinking.type == "thinking" and "plan: list files" in thinking.thinking and thinking.signature
    assert text.text.strip() == "I will list them."
    with client.messages.stream(model="m", max_tokens=100, messages=[
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": blocks_as_params(msg.content)},
            {"role": "user", "content": "next"}]) as s:
        events = [e.type for e in s]
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert_prefix_chain(store.list_calls())


def test_stream_event_sequence_and_deltas(proxy, engine):
    engine.replies.append("<think>hmm</think>Sure." + tool_call_text(("Bash", {"command": "pwd"})))
    key = proxy.register_rollout("raw-sse")
    body = {"model": "m", "max_tokens": 64, "stream": True, "tools": TOOLS,
            "messages": [{"role": "user", "content": "where am I?"}]}
    r = httpx.post(proxy.base_urls(key)["anthropic"] + "/v1/messages?beta=true", json=body,
                   headers={"anthropic-version": "2023-06-01"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    names = [line.split(": ", 1)[1] for line in r.text.splitlines() if line.startswith("event: ")]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == names.count("content_block_stop") == 3
    for delta in ("thinking_delta", "signature_delta", "text_delta", "input_json_delta"):
        assert f'"type":"{delta}"' in r.text


def test_system_forms_and_inline_system_message(client, engine, store, renderer):
    engine.replies.extend(["a", "b"])
    client.messages.create(model="m", max_tokens=20, system="Be brief.", messages=[{"role": "user", "content": "x"}])
    client.messages.create(model="m", max_tokens=20, system=[{"type": "text", "text": "Be brief."}],
                           messages=[{"role": "user", "content": "x"}])
    c0, c1 = store.list_calls()
    assert c0.prompt_ids == c1.prompt_ids  # string and block forms render the same
    raw = httpx.post(str(client.base_url).rstrip("/") + "/v1/messages", json={
        "model": "m", "max_tokens": 20, "system": "S",
        "messages": [{"role": "user", "content": "x"}, {"role": "system", "content": [{"type": "text", "text": "ENV"}]},
                     {"role": "user", "content": "y"}]})
    assert raw.status_code == 200, raw.text
    last = store.list_calls(include_raw=True)[-1]
    assert last.status == "ok" and last.request["messages"][1]["role"] == "system"
    text = renderer.decode(last.prompt_ids)
    # an inline system message after a user turn joins that turn, in front (render/template.py fold_late_system)
    assert text.index("system\nS<") < text.index("user\nENV\n\nx<") < text.index("user\ny<")
    assert text.count("system\n") == 1


def test_count_tokens(client, store):
    n = client.messages.count_tokens(model="m", messages=[{"role": "user", "content": "hello world"}], tools=TOOLS)
    assert n.input_tokens > 10
    more = client.messages.count_tokens(model="m", messages=[{"role": "user", "content": "hello world " * 50}],
                                        tools=TOOLS)
    assert more.input_tokens >= n.input_tokens + 49 and store.count_calls() == 0


def test_adhoc_route_and_models(proxy, engine, store):
    engine.replies.append("hi")
    client = anthropic.Anthropic(base_url=proxy.base_urls()["anthropic"], api_key="x", max_retries=0)
    client.messages.create(model="any-name", max_tokens=10, messages=[{"role": "user", "content": "x"}])
    assert store.list_calls()[0].rollout_id == "adhoc"
    models = client.models.list()
    assert [m.id for m in models.data] == [proxy.served_model]
    assert client.models.retrieve(proxy.served_model).id == proxy.served_model
    with pytest.raises(anthropic.NotFoundError):  # calls alias any name; the models route lists only ours
        client.models.retrieve("claude-whatever")
