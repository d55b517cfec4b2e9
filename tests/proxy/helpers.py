"""Assertions on the store shared by the proxy tests."""

from __future__ import annotations

from harnessrl.store import PROMPT, CallRecord


def assert_call_ok(call: CallRecord) -> None:
    assert call.status == "ok"
    assert call.sampled_ids and len(call.logprobs) == len(call.sampled_ids)
    assert len(call.prompt_provenance) == len(call.prompt_ids)


def assert_prefix_chain(calls: list[CallRecord]) -> None:
    """Call k+1's prompt starts with call k's prompt + sampled ids; reused sampled ids keep their version."""
    for prev, nxt in zip(calls, calls[1:]):
        head = prev.prompt_ids + prev.sampled_ids
        assert nxt.prompt_ids[: len(head)] == head, f"seq {nxt.seq} does not extend seq {prev.seq}"
        start = len(prev.prompt_ids)
        assert nxt.prompt_provenance[start : len(head)] == [prev.policy_version] * len(prev.sampled_ids)
        assert nxt.prompt_provenance[: start] == prev.prompt_provenance
        assert nxt.prompt_provenance[len(head):] == [PROMPT] * (len(nxt.prompt_ids) - len(head))


def tool_call_text(*calls: tuple[str, dict]) -> str:
    """Model output in the Hermes convention: one <tool_call> tag per call."""
    import json

    return "".join(f'<tool_call>\n{json.dumps({"name": n, "arguments": a})}\n</tool_call>\n' for n, a in calls)
