"""Exact history through the re-serialisations real harnesses do (docs/harnesses.md), on two templates.

A scripted agent loop: each turn the harness resends its history the way that harness does, the
conversation renders it, a fixed reply is "sampled", and the harness appends the served reply and
the tool results. Checked: the prefix property, provenance, incremental tails, and that the ids
equal a plain full rendering of the served history token for token.
"""

from __future__ import annotations

import json
import re

import pytest

from harnessrl.render.conversation import Conversation
from harnessrl.render.messages import Message, ToolCall, ToolSpec
from harnessrl.render.tool_formats import render_calls
from harnessrl.store.records import PROMPT

TOOLS = [
    ToolSpec("bash", "Run a shell command.", {"type": "object", "properties": {"command": {"type": "string"}},
                                              "required": ["command"]}),
    ToolSpec("read", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}),
]
SYSTEM = "You are a coding agent. Work in the repository."
TASK = "The tests in test_a.py fail. Fix a.py."
CTX = "<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>> turn {k} <<<END_OPENCLAW_INTERNAL_CONTEXT>>>"


def bash(cmd: str, **extra) -> ToolCall:
    return ToolCall("x", "bash", {"command": cmd, **extra})


# The scripted model: text + calls per turn, in the Hermes convention the renderer parses.
SCRIPT = [
    ("I'll look around first.", [bash("ls -la", timeout=30)]),
    ("", [ToolCall("x", "read", {"path": "a.py"}), ToolCall("x", "read", {"path": "test_a.py"})]),  # parallel
    ('Running tests.\n<tool_call>{"name": "bash", "arguments": {"command": "pytest"</tool_call>', []),  # malformed
    ("", [bash("sed -i 's/-/+/' a.py && pytest -q")]),
    ("Fixed: a.py now adds instead of subtracting.", []),
]


def reply_text(content: str, calls: list[ToolCall]) -> str:
    body = render_calls(calls, "hermes")
    return f"{content}\n{body}" if content and body else (content or body)


def reorder(d):
    if isinstance(d, dict):
        return {k: reorder(d[k]) for k in reversed(list(d))}
    return d


# ---- how each harness resends the served history ---------------------------------------------
def resend_claude_code(history: list[Message], k: int) -> list[Message]:
    out = []
    for i, m in enumerate(history):
        meta = {"cache_control": {"type": "ephemeral"}} if i == len(history) - 1 else {}
        if m.role == "system" and i > 0:  # in-messages system: block list first, then a plain string
            content = m.content.replace("\n\n", "\n") if k % 2 else m.content
            out.append(Message("system", content, meta=meta))
        elif m.role == "assistant":
            calls = [ToolCall(c.id, c.name, reorder(c.arguments)) for c in m.tool_calls]
            out.append(Message("assistant", m.content, reasoning=m.reasoning, tool_calls=calls,
                               meta={"signature": "sig"}))
        elif m.role == "tool":
            out.append(Message("tool", m.content, tool_call_id=m.tool_call_id, meta={"is_error": False, **meta}))
        else:
            out.append(Message(m.role, m.content, meta=meta))
    return out


def resend_codex(history: list[Message], k: int) -> list[Message]:
    out = []
    for m in history:
        if m.role == "assistant":  # key order changes; reasoning comes back without its text
            calls = [ToolCall(c.id, c.name, json.dumps(reorder(c.arguments))) for c in m.tool_calls]
            out.append(Message("assistant", m.content, reasoning=None, tool_calls=calls))
        else:
            out.append(Message(m.role, m.content, tool_call_id=m.tool_call_id))
    return out


def resend_mini_swe(history: list[Message], k: int) -> list[Message]:
    out = []
    for m in history:
        if m.role == "assistant":
            calls = [ToolCall(c.id, c.name, json.dumps(reorder(c.arguments), indent=2)) for c in m.tool_calls]
            out.append(Message("assistant", m.content, tool_calls=calls))
        else:
            out.append(Message(m.role, m.content, tool_call_id=m.tool_call_id))
    return out


def resend_openclaw(history: list[Message], k: int) -> list[Message]:
    out = []
    for m in history:
        if m.role == "assistant":
            calls = [ToolCall(re.sub(r"[^A-Za-z0-9]", "", c.id), c.name,
                              json.dumps(c.arguments, separators=(",", ":"))) for c in m.tool_calls]
            out.append(Message("assistant", m.content or None, reasoning=m.reasoning, tool_calls=calls))
        elif m.role == "tool":
            out.append(Message("tool", m.content, tool_call_id=re.sub(r"[^A-Za-z0-9]", "", m.tool_call_id or "")))
        else:
            out.append(Message(m.role, m.content))
    return out + [Message("user", CTX.format(k=k))]  # not kept in the next request


HARNESSES = {"claude_code": resend_claude_code, "codex": resend_codex, "mini_swe": resend_mini_swe}


def first_history(harness: str) -> list[Message]:
    msgs = [Message("system", SYSTEM), Message("user", TASK)]
    if harness == "claude_code":
        msgs.append(Message("system", "Environment:\n\ncwd=/work\n\nplatform=linux"))
    return msgs


def run_loop(renderer, conv, harness: str, resend, *, truncate_turn: int | None = None):
    """Drive SCRIPT through the conversation. Returns per-turn (rendered, sampled, served history)."""
    history = first_history(harness)
    turns = []
    for k, (content, calls) in enumerate(SCRIPT):
        request = resend(history, k)
        rendered = conv.prepare(request, TOOLS)
        stop = k != truncate_turn
        text = reply_text(content, calls)
        sampled = renderer.encode(text) + ([renderer.eot_id] if stop else [])
        parsed = conv.commit(rendered, sampled, policy_version=10 + k, finish_reason=None)
        turns.append((rendered, sampled, list(history)))
        served = Message("assistant", parsed.content, reasoning=parsed.reasoning, tool_calls=parsed.tool_calls)
        history.append(served)
        for call in parsed.tool_calls:
            history.append(Message("tool", f"output of {call.name} {json.dumps(call.arguments)}",
                                   tool_call_id=call.id))
        if not parsed.tool_calls:
            history.append(Message("user", "Continue." if k < len(SCRIPT) - 1 else "Thanks."))
    return turns


@pytest.fixture(params=["smol", "qwen"])
def renderer(request):
    return request.getfixturevalue(request.param)


@pytest.mark.parametrize("harness", sorted(HARNESSES))
def test_prefix_property_through_reserialised_history(renderer, harness):
    conv = Conversation(renderer)
    turns = run_loop(renderer, conv, harness, HARNESSES[harness])
    for k in range(1, len(turns)):
        prev, prev_sampled, _ = turns[k - 1]
        cur, _, served = turns[k]
        assert cur.parent_turn == k - 1, f"turn {k} did not continue turn {k - 1}"
        assert cur.ids[: len(prev.ids) + len(prev_sampled)] == prev.ids + prev_sampled
        assert cur.incremental, "tail should render behind the stub prefix (and equal the full rendering)"
        span = cur.provenance[len(prev.ids) : len(prev.ids) + len(prev_sampled)]
        assert span == [10 + k - 1] * len(prev_sampled)
        assert cur.provenance[len(prev.ids) + len(prev_sampled) :] == [PROMPT] * cur.new_tokens
        # the incremental ids are exactly what a full rendering of the served history gives
        assert cur.ids == renderer.render(served, TOOLS)
    assert turns[1][0].tokenized <= turns[1][0].new_tokens


def test_parallel_and_malformed_turns_parse_as_expected(smol):
    conv = Conversation(smol)
    run_loop(smol, conv, "mini_swe", resend_mini_swe)
    parsed = [t.parsed for t in conv.turns]
    assert len(parsed[1].tool_calls) == 2 and parsed[1].finish_reason == "tool_calls"
    assert parsed[2].tool_calls == [] and "<tool_call>" in parsed[2].content and parsed[2].finish_reason == "stop"
    assert parsed[4].finish_reason == "stop"


def test_length_truncated_reply_gets_closing_token(renderer):
    conv = Conversation(renderer)
    turns = run_loop(renderer, conv, "codex", resend_codex, truncate_turn=2)
    assert conv.turns[2].parsed.finish_reason == "length"
    prev, prev_sampled, _ = turns[2]
    cur, _, served = turns[3]
    assert prev_sampled[-1] != renderer.eot_id
    end = len(prev.ids) + len(prev_sampled)
    assert cur.ids[:end] == prev.ids + prev_sampled
    assert cur.ids[end] == renderer.eot_id and cur.provenance[end] == PROMPT
    assert cur.ids == renderer.render(served, TOOLS)


def test_openclaw_context_message_branches_but_keeps_sampled_tokens(renderer):
    conv = Conversation(renderer)
    turns = run_loop(renderer, conv, "openclaw", resend_openclaw)
    for k in range(1, len(turns)):
        prev, prev_sampled, _ = turns[k - 1]
        cur, _, served = turns[k]
        assert cur.parent_turn is None  # the previous request's last message is not resent
        assert cur.ids == renderer.render(served + [Message("user", CTX.format(k=k))], TOOLS)
        assert cur.provenance.count(10 + k - 1) == len(prev_sampled)  # the reply is spliced in as sampled
        ctx_ids = len(renderer.encode("<|im_start|>user\n" + CTX.format(k=k - 1) + "<|im_end|>\n<|im_start|>assistant\n"))
        shared = next((i for i, (a, b) in enumerate(zip(prev.ids, cur.ids)) if a != b), len(prev.ids))
        assert shared >= len(prev.ids) - ctx_ids  # everything before the context message is shared


def test_retry_gets_the_same_ids(smol):
    conv = Conversation(smol)
    request = first_history("codex")
    first = conv.prepare(request, TOOLS)
    conv.commit(first, smol.encode("Hi.") + [smol.eot_id], 0)
    again = conv.prepare([Message(m.role, m.content + "  ") for m in request], TOOLS)
    assert again.ids == first.ids and again.retry_of == 0 and again.new_tokens == 0
