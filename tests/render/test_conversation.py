"""Conversation: no false reuse after rewrites, incremental cost, rerender mode, concurrency."""

from __future__ import annotations

import pytest

from harnessrl.render.conversation import Conversation
from harnessrl.render.messages import Message, ToolCall, ToolSpec
from harnessrl.render.tool_formats import render_calls
from harnessrl.store.records import PROMPT

BASH = ToolSpec("bash", "Run a shell command.", {"type": "object", "properties": {"command": {"type": "string"}}})


def call_reply(r, cmd: str) -> list[int]:
    return r.encode(render_calls([ToolCall("x", "bash", {"command": cmd})], "hermes")) + [r.eot_id]


def agent_turns(r, conv, n: int, result_text: str = "ok"):
    """n tool-calling turns; returns (rendered list, sampled list, final served history)."""
    history = [Message("system", "You are an agent."), Message("user", "Do the task.")]
    out = []
    for k in range(n):
        rendered = conv.prepare(history, [BASH])
        sampled = call_reply(r, f"step {k}")
        parsed = conv.commit(rendered, sampled, policy_version=k)
        out.append((rendered, sampled))
        history = history + [Message("assistant", parsed.content, tool_calls=parsed.tool_calls),
                             Message("tool", f"{result_text} {k}", tool_call_id=parsed.tool_calls[0].id)]
    return out, history


def extends(rendered, prev) -> bool:
    p, s = prev
    return rendered.ids[: len(p.ids) + len(s)] == p.ids + s


@pytest.mark.parametrize("rewrite,parent", [("compaction", None), ("dropped_message", 1), ("changed_system", None),
                                            ("edited_result", 0), ("tools", None)])
def test_rewritten_history_is_not_reused_falsely(smol, rewrite, parent):
    conv = Conversation(smol)
    turns, history = agent_turns(smol, conv, 3)  # history: sys user a0 t0 a1 t1 a2 t2
    tools = [BASH]
    if rewrite == "compaction":
        request = history[:1] + [Message("user", "Summary of the work so far: ran 3 steps."), Message("user", "Go on.")]
    elif rewrite == "dropped_message":
        request = history[:5] + history[6:]  # drop t1: still continues turn 1 (sys user a0 t0 + a1)
    elif rewrite == "changed_system":
        request = [Message("system", "You are a different agent.")] + history[1:]
    elif rewrite == "edited_result":
        request = history[:3] + [Message("tool", "EDITED", tool_call_id="t")] + history[4:]  # continues turn 0
    else:
        request, tools = history, [BASH, ToolSpec("read", "Read a file.")]
    rendered = conv.prepare(request, tools)
    assert rendered.parent_turn == parent
    later = turns if parent is None else turns[parent + 1 :]
    assert not any(extends(rendered, t) for t in later), "claimed a prefix the history no longer has"
    if parent is not None:
        assert extends(rendered, turns[parent])
    spliced = [v for v in rendered.provenance if v != PROMPT]
    kept_replies = [] if rewrite == "compaction" else [0, 1, 2]
    for k in kept_replies:  # every reply still in the request is there as its sampled tokens
        assert spliced.count(k) == len(turns[k][1])
    # whatever the path, the ids are the faithful rendering of this request (replies spliced as sampled)
    assert rendered.ids == smol.render(request, tools)


def test_tokenised_per_turn_does_not_grow_with_history(smol):
    conv = Conversation(smol)
    big = "line of tool output with some words in it\n" * 60  # ~600 tokens per tool result
    turns, _ = agent_turns(smol, conv, 8, result_text=big)
    tokenized = [r.tokenized for r, _ in turns[1:]]
    new = [r.new_tokens for r, _ in turns[1:]]
    lengths = [len(r.ids) for r, _ in turns]
    assert lengths[-1] > 5 * lengths[1]  # the history grew a lot ...
    assert max(tokenized) <= min(tokenized) + 2  # ... the tokeniser work per turn did not
    assert all(t <= n for t, n in zip(tokenized, new))
    assert conv.tokenized_total == turns[0][0].tokenized + sum(tokenized)


def test_rerender_mode_uses_chunk_cache(smol):
    conv = Conversation(smol, mode="rerender")
    big = "some output words\n" * 80
    turns, _ = agent_turns(smol, conv, 6, result_text=big)
    tokenized = [r.tokenized for r, _ in turns[1:]]
    assert max(tokenized) <= min(tokenized) + 2
    assert all(r.mode == "rerender" and set(r.provenance) == {PROMPT} for r, _ in turns)


def test_rerender_drops_old_thinking_exact_keeps_it(thinking):
    r = thinking
    first = [Message("system", "Think first."), Message("user", "2+2?")]
    sampled = r.encode("<think>\nadd them\n</think>\n\n4") + [r.eot_id]

    def second_request(parsed):
        return first + [Message("assistant", parsed.content, reasoning=parsed.reasoning), Message("user", "3+3?")]

    exact = Conversation(r)
    p0 = exact.prepare(first)
    parsed = exact.commit(p0, sampled, 1)
    assert parsed.reasoning == "add them" and parsed.content == "4"
    p1 = exact.prepare(second_request(parsed))
    assert p1.ids[: len(p0.ids) + len(sampled)] == p0.ids + sampled  # thinking tokens kept as sampled

    plain = Conversation(r, mode="rerender")
    q0 = plain.prepare(first)
    parsed = plain.commit(q0, sampled, 1)
    q1 = plain.prepare(second_request(parsed))
    assert q1.ids == r.render(second_request(parsed))  # what a deployment sends: old thinking dropped
    assert "add them" not in r.decode(q1.ids)
    assert q1.parent_turn == 0 and q1.ids[: len(q0.ids) + len(sampled)] != q0.ids + sampled
    assert set(q1.provenance) == {PROMPT} and 0 < q1.new_tokens < len(q1.ids)


def test_prepare_twice_before_commit_and_branches(qwen):
    """Sub-agents: two requests in flight on one conversation, then both continue their own turn."""
    conv = Conversation(qwen)
    base = [Message("system", "Agent."), Message("user", "task")]
    a = conv.prepare(base + [Message("user", "sub-agent A")], [BASH])
    b = conv.prepare(base + [Message("user", "sub-agent B")], [BASH])
    pa = conv.commit(a, call_reply(qwen, "a"), 0)
    pb = conv.commit(b, call_reply(qwen, "b"), 0)
    for req, parsed, turn in ((a, pa, 0), (b, pb, 1)):
        nxt = conv.prepare(req.messages + [Message("assistant", "", tool_calls=parsed.tool_calls),
                                           Message("tool", "done", tool_call_id=parsed.tool_calls[0].id)], [BASH])
        assert nxt.parent_turn == turn
        assert nxt.ids[: len(req.ids)] == req.ids


def test_unknown_mode_is_a_clear_error(smol):
    with pytest.raises(ValueError, match="render mode"):
        Conversation(smol, mode="fast")


def test_turns_store_only_their_suffix_and_share_history_objects(qwen):
    conv = Conversation(qwen)
    turns, _ = agent_turns(qwen, conv, 4)
    for k, (rendered, sampled) in enumerate(turns):
        turn = conv.turns[k]
        assert turn.prompt_ids == rendered.ids and turn.provenance == rendered.provenance
        assert turn.sampled_ids == sampled
        if k:
            assert turn.base is conv.turns[k - 1] and len(turn.suffix_ids) == rendered.new_tokens
            assert turn.messages[0] is conv.turns[0].messages[0]  # no copy of the history per turn
            assert turn.messages[2 * k] is conv.turns[k - 1].reply
    retry = conv.prepare(turns[3][0].messages, [BASH])
    assert retry.retry_of == 3 and retry.ids == turns[3][0].ids
    conv.commit(retry, turns[3][1], 3)
    assert conv.turns[-1].prompt_ids == turns[3][0].ids and conv.turns[-1].base is conv.turns[2]


def test_malformed_messages_and_refusing_templates_raise_typed_errors(smol, smol_tokenizer):
    from harnessrl.render.errors import RenderError, RenderInputError, TemplateError
    from harnessrl.render.renderer import Renderer

    conv = Conversation(smol)
    with pytest.raises(RenderInputError, match="content must be text"):
        conv.prepare([Message("user", [{"type": "text", "text": "hi"}])])  # type: ignore[arg-type]
    with pytest.raises(RenderInputError, match="JSON"):
        conv.prepare([Message("user", "x"), Message("assistant", "", tool_calls=[ToolCall("1", "bash", {1j})])])
    strict = ("{% for m in messages %}{% if 'forbidden' in m.content %}{{ raise_exception('no such word') }}{% endif %}"
              "<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
              "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    r = Renderer(smol_tokenizer, chat_template=strict)
    conv = Conversation(r)
    first = conv.prepare([Message("user", "x")])
    conv.commit(first, r.encode("ok") + [r.eot_id], 0)
    with pytest.raises(TemplateError, match="no such word") as err:  # on the incremental path too
        conv.prepare([Message("user", "x"), Message("assistant", "ok"), Message("user", "a forbidden word")])
    assert isinstance(err.value, RenderError) and isinstance(err.value, ValueError)


def test_common_prefix_and_summary(smol):
    from harnessrl.render.conversation import _common_prefix

    a = list(range(5000))
    assert _common_prefix(a, a) == 5000
    assert _common_prefix(a, a[:3000] + [-1] + a[3001:]) == 3000
    assert _common_prefix(a, a[:10]) == 10 and _common_prefix([], a) == 0
    conv = Conversation(smol)
    turns, _ = agent_turns(smol, conv, 2)
    s = turns[1][0].summary()
    assert s["parent_turn"] == 0 and s["incremental"] and s["reused_tokens"] == len(turns[0][0].ids) + len(turns[0][1])
