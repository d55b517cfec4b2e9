"""A first end-to-end check of the renderer API the proxy calls."""

from __future__ import annotations

from harnessrl.render.conversation import Conversation
from harnessrl.render.messages import Message, ToolCall, ToolSpec
from harnessrl.store.records import PROMPT

BASH = ToolSpec("bash", "Run a shell command", {"type": "object", "properties": {"command": {"type": "string"}}})


def test_two_turns_extend_exactly(smol):
    conv = Conversation(smol)
    msgs = [Message("system", "You are an agent."), Message("user", "list files")]
    first = conv.prepare(msgs, [BASH])
    sampled = smol.encode('<tool_call>\n{"arguments": {"command": "ls"}, "name": "bash"}\n</tool_call><|im_end|>')
    parsed = conv.commit(first, sampled, policy_version=3)
    assert parsed.finish_reason == "tool_calls" and parsed.tool_calls[0].arguments == {"command": "ls"}
    call = parsed.tool_calls[0]
    resent = msgs + [
        Message("assistant", None, tool_calls=[ToolCall(call.id.replace("_", ""), "bash", '{"command":"ls"}')]),
        Message("tool", "a.txt", tool_call_id=call.id),
    ]
    second = conv.prepare(resent, [BASH])
    assert second.parent_turn == 0
    assert second.ids[: len(first.ids) + len(sampled)] == first.ids + sampled
    assert second.provenance[len(first.ids) : len(first.ids) + len(sampled)] == [3] * len(sampled)
    assert second.provenance[-1] == PROMPT
    assert smol.decode(second.ids).endswith("<|im_start|>assistant\n")
