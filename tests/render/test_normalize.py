"""Meaning-equality: property tests over the ways harnesses re-serialise a resent message."""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from harnessrl.render.messages import Message, ToolCall, ToolSpec
from harnessrl.render.normalize import history_matches, message_key, norm_text, reply_matches, tools_key

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000), st.text(max_size=12))
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
args_st = st.dictionaries(st.text(min_size=1, max_size=8), json_value, max_size=4)
text_st = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
id_st = st.text(alphabet="abcXYZ019_-.:", min_size=1, max_size=12)


def reorder(d):
    """Same JSON value with every object's keys in reverse order."""
    if isinstance(d, dict):
        return {k: reorder(d[k]) for k in reversed(list(d))}
    if isinstance(d, list):
        return [reorder(x) for x in d]
    return d


@st.composite
def assistant_msgs(draw):
    calls = [ToolCall(draw(id_st), draw(st.sampled_from(["bash", "read", "edit"])), draw(args_st))
             for _ in range(draw(st.integers(0, 3)))]
    content = draw(text_st)
    return Message("assistant", content, reasoning=draw(st.none() | text_st), tool_calls=calls)


def resend_like_a_harness(msg: Message, style: int) -> Message:
    """One of the re-serialisations in docs/harnesses.md."""
    calls = []
    for c in msg.tool_calls:
        args = c.arguments
        if style == 0:  # Claude Code: input re-serialised compactly (kept as an object)
            args = reorder(args)
        elif style == 1:  # Codex / mini-swe-agent: arguments string with another key order
            args = json.dumps(reorder(args), indent=1)
        else:  # OpenClaw: compact string, ids lose non-alphanumerics
            args = json.dumps(args, separators=(",", ":"))
        cid = re.sub(r"[^A-Za-z0-9]", "", c.id) if style == 2 else c.id
        calls.append(ToolCall(cid, c.name, args))
    content = msg.content
    if style == 2 and calls and not content.strip():
        content = None  # tool-call-only message comes back with content null
    reasoning = None if style == 1 else msg.reasoning  # Codex: reasoning text not replayed
    meta = {"cache_control": {"type": "ephemeral"}} if style == 0 else {}
    return Message("assistant", content, reasoning=reasoning, tool_calls=calls, meta=meta)


@settings(max_examples=150, deadline=None)
@given(assistant_msgs(), st.integers(0, 2))
def test_reserialised_reply_matches(msg, style):
    assert reply_matches(message_key(msg), message_key(resend_like_a_harness(msg, style)))


@settings(max_examples=100, deadline=None)
@given(text_st, st.sampled_from(["\n", "\n\n", " ", "\t "]))
def test_whitespace_and_block_joining_do_not_change_meaning(text, sep):
    parts = text.split(" ")
    a = Message("system", " ".join(parts))
    b = Message("system", sep.join(parts) + "\n")
    assert message_key(a) == message_key(b)


@settings(max_examples=100, deadline=None)
@given(assistant_msgs(), st.text(alphabet="abcdefgh", min_size=1, max_size=5))
def test_changed_text_or_arguments_change_meaning(msg, extra):
    changed = Message("assistant", (msg.content or "") + " " + extra, tool_calls=msg.tool_calls)
    assert not reply_matches(message_key(msg), message_key(changed))
    if msg.tool_calls:
        c = msg.tool_calls[0]
        other = dict(c.arguments, **{"__x": extra})
        calls = [ToolCall(c.id, c.name, other)] + msg.tool_calls[1:]
        assert not reply_matches(message_key(msg), message_key(Message("assistant", msg.content, tool_calls=calls)))


def test_reasoning_dropped_matches_but_different_reasoning_does_not():
    ours = message_key(Message("assistant", "hi", reasoning="plan A"))
    assert reply_matches(ours, message_key(Message("assistant", "hi")))
    assert reply_matches(ours, message_key(Message("assistant", "<think>plan A</think>hi")))
    assert not reply_matches(ours, message_key(Message("assistant", "hi", reasoning="plan B")))


def test_role_and_none_content():
    assert message_key(Message("user", None)) == message_key(Message("user", ""))
    assert message_key(Message("user", "x")) != message_key(Message("system", "x"))
    assert norm_text(None) == "" and norm_text(" a \n b ") == "a b"


def test_history_matches_prefix_only():
    h = [message_key(Message("user", "a")), message_key(Message("assistant", "b"))]
    assert history_matches(h, h + [message_key(Message("user", "c"))])
    assert not history_matches(h, [message_key(Message("user", "a2"))] + h[1:])
    assert not history_matches(h, h[:1])


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]), args_st), max_size=4, unique_by=lambda t: t[0]))
def test_tools_key_ignores_order_and_key_order(specs):
    tools = [ToolSpec(n, f"tool {n}", {"type": "object", "properties": p}) for n, p in specs]
    shuffled = [ToolSpec(t.name, t.description + "  ", reorder(t.parameters)) for t in reversed(tools)]
    assert tools_key(tools) == tools_key(shuffled)
    if tools:
        assert tools_key(tools) != tools_key(tools[1:])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(assistant_msgs(), st.integers(0, 2)), min_size=1, max_size=6))
def test_key_cache_equals_plain_keys(items):
    """Through the per-conversation cache, every key (first sight or resend) is the plain key."""
    from harnessrl.render.normalize import KeyCache

    cache = KeyCache(max_entries=3)  # small: eviction is exercised too
    for msg, style in items + items:
        again = resend_like_a_harness(msg, style)
        assert cache.message(msg) == message_key(msg)
        assert cache.message(again) == message_key(again)


def test_key_cache_hits_on_resent_history_and_tools():
    from harnessrl.render.normalize import KeyCache

    cache = KeyCache()
    history = [Message("system", "Be  careful.\n" * 100), Message("user", "fix it"),
               Message("assistant", "", tool_calls=[ToolCall("c1", "bash", {"cmd": "ls", "n": 1})])]
    tools = [ToolSpec("bash", "Run.", {"type": "object", "properties": {"cmd": {"type": "string"}}})]
    first = cache.messages(history), cache.tools(tools)
    assert cache.misses == 4 and cache.hits == 0
    resent = [Message(m.role, m.content, tool_calls=[ToolCall("x", c.name, dict(c.arguments)) for c in m.tool_calls])
              for m in history]  # new objects, equal raw fields
    assert (cache.messages(resent), cache.tools([ToolSpec(**vars(t)) for t in tools])) == first
    assert cache.hits == 4
    # {"n": 1} and {"n": True} are different raw fields and different meanings
    other = Message("assistant", "", tool_calls=[ToolCall("c1", "bash", {"cmd": "ls", "n": True})])
    assert cache.message(other) == message_key(other) != first[0][2]


def test_key_cache_passes_malformed_messages_to_the_typed_error():
    import pytest

    from harnessrl.render.errors import RenderInputError
    from harnessrl.render.normalize import KeyCache

    with pytest.raises(RenderInputError):
        KeyCache().message(Message("user", [{"type": "text"}]))  # type: ignore[arg-type]
