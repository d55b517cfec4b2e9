"""Anthropic Messages (`POST /v1/messages`, `/v1/messages/count_tokens`): request -> canonical
messages, finished call -> response body or the full SSE sequence.

Lenient to unknown fields and block types (Claude Code sends `cache_control`, `metadata`,
`context_management`, `output_config`, ...). `system` may be a string or text blocks; `role:"system"`
messages inside `messages` are kept in place; thinking blocks carry their signature in `meta`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from harnessrl.proxy.canonical import CallResult, ChatRequest
from harnessrl.proxy.errors import bad_request, validation_message
from harnessrl.proxy.jsonutil import dumps_str
from harnessrl.proxy.sse import event
from harnessrl.render.messages import Message, ToolCall, ToolSpec

PROTOCOL = "anthropic.messages"
FAMILY = "anthropic"
_STOP_REASON = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


class _Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["user", "assistant", "system"]
    content: str | list[dict[str, Any]]


class _Request(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str = ""
    messages: list[_Message]
    system: str | list[dict[str, Any]] | None = None
    tools: list[dict[str, Any]] | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop_sequences: list[str] | None = None
    stream: bool = False
    tool_choice: Any = None


def parse(body: Any) -> ChatRequest:
    """Validate an Anthropic Messages body into a ChatRequest (ProxyError 400 on bad input)."""
    try:
        req = _Request.model_validate(body)
    except ValidationError as e:
        raise bad_request(validation_message(e)) from None
    messages: list[Message] = []
    if req.system:
        messages.append(Message(role="system", content=_text_of(req.system, "system")))
    for i, m in enumerate(req.messages):
        messages.extend(_convert_message(m, f"messages.{i}"))
    return ChatRequest(
        messages=messages,
        tools=[_convert_tool(t, i) for i, t in enumerate(req.tools or [])],
        model=req.model,
        stream=req.stream,
        temperature=req.temperature,
        top_p=req.top_p,
        max_tokens=req.max_tokens,
        stop=list(req.stop_sequences or []),
        extra={"tool_choice": req.tool_choice},
    )


def _text_of(content: str | list[dict[str, Any]], where: str) -> str:
    """Join the text of a string or a list of blocks (images and documents become placeholders)."""
    if isinstance(content, str):
        return content
    parts = []
    for j, block in enumerate(content):
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise bad_request(f"invalid request: {where}.{j}.text must be a string")
            parts.append(text)
        elif kind in ("image", "document"):
            parts.append(f"[{kind}]")
        elif kind is None:
            raise bad_request(f"invalid request: {where}.{j}: content block without a type")
    return "\n".join(parts)


def _convert_message(m: _Message, where: str) -> list[Message]:
    if m.role == "system":
        return [Message(role="system", content=_text_of(m.content, where))]
    if isinstance(m.content, str):
        return [Message(role=m.role, content=m.content)]
    if m.role == "assistant":
        return [_assistant_message(m.content, where)]
    return _user_messages(m.content, where)


def _assistant_message(blocks: list[dict[str, Any]], where: str) -> Message:
    msg = Message(role="assistant")
    texts: list[str] = []
    for j, block in enumerate(blocks):
        kind = block.get("type")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "thinking":
            msg.reasoning = (msg.reasoning or "") + str(block.get("thinking", ""))
            if block.get("signature"):
                msg.meta["signature"] = block["signature"]
        elif kind == "tool_use":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
                raise bad_request(f"invalid request: {where}.content.{j}: tool_use needs a string id and name")
            msg.tool_calls.append(ToolCall(id=block["id"], name=block["name"], arguments=block.get("input", {})))
        elif kind is None:
            raise bad_request(f"invalid request: {where}.content.{j}: content block without a type")
    msg.content = "".join(texts)
    return msg


def _user_messages(blocks: list[dict[str, Any]], where: str) -> list[Message]:
    """A user turn: tool_result blocks become `tool` messages, the rest joins into user text (in order)."""
    out: list[Message] = []
    pending: list[dict[str, Any]] = []
    for j, block in enumerate(blocks):
        if block.get("type") != "tool_result":
            pending.append(block)
            continue
        if pending:
            out.append(Message(role="user", content=_text_of(pending, f"{where}.content")))
            pending = []
        if not isinstance(block.get("tool_use_id"), str):
            raise bad_request(f"invalid request: {where}.content.{j}: tool_result needs a tool_use_id")
        content = block.get("content", "")
        text = _text_of(content if isinstance(content, (str, list)) else str(content), f"{where}.content.{j}")
        meta = {"is_error": True} if block.get("is_error") else {}
        out.append(Message(role="tool", content=text, tool_call_id=block["tool_use_id"], meta=meta))
    if pending or not out:
        out.append(Message(role="user", content=_text_of(pending, f"{where}.content")))
    return out


def _convert_tool(tool: dict[str, Any], i: int) -> ToolSpec:
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise bad_request(f"invalid request: tools.{i}.name is required")
    schema = tool.get("input_schema")
    return ToolSpec(name=name, description=str(tool.get("description", "")),
                    parameters=schema if isinstance(schema, dict) else {})


# -- responses ----------------------------------------------------------------------------------


def _signature(result: CallResult) -> str:
    return f"harnessrl-{result.call_id}"


def _tool_input(arguments: Any) -> dict[str, Any]:
    return arguments if isinstance(arguments, dict) else {"input": arguments}


def content_blocks(result: CallResult) -> list[dict[str, Any]]:
    c = result.completion
    blocks: list[dict[str, Any]] = []
    if c.reasoning:
        blocks.append({"type": "thinking", "thinking": c.reasoning, "signature": _signature(result)})
    if c.content:
        blocks.append({"type": "text", "text": c.content})
    for tc in c.tool_calls:
        blocks.append({"type": "tool_use", "id": tc.id, "name": tc.name, "input": _tool_input(tc.arguments)})
    return blocks


def _usage(result: CallResult, output_tokens: int) -> dict[str, Any]:
    return {"input_tokens": result.prompt_tokens, "output_tokens": output_tokens,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def _message(result: CallResult, content: list[dict[str, Any]], stop_reason: str | None, out_tokens: int) -> dict:
    return {"id": f"msg_{result.call_id}", "type": "message", "role": "assistant", "model": result.model,
            "content": content, "stop_reason": stop_reason, "stop_sequence": None,
            "usage": _usage(result, out_tokens)}


def response_body(result: CallResult) -> dict[str, Any]:
    stop = _STOP_REASON[result.completion.finish_reason]
    return _message(result, content_blocks(result), stop, result.completion_tokens)


def stream_events(result: CallResult) -> list[bytes]:
    """message_start, per block start/delta(s)/stop, message_delta, message_stop."""
    events = [event("message_start", {"type": "message_start", "message": _message(result, [], None, 1)})]
    for i, block in enumerate(content_blocks(result)):
        kind = block["type"]
        if kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [{"type": "thinking_delta", "thinking": block["thinking"]},
                      {"type": "signature_delta", "signature": block["signature"]}]
        elif kind == "text":
            start, deltas = {"type": "text", "text": ""}, [{"type": "text_delta", "text": block["text"]}]
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": dumps_str(block["input"])}]
        events.append(event("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}))
        events.extend(event("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})
                      for d in deltas)
        events.append(event("content_block_stop", {"type": "content_block_stop", "index": i}))
    delta = {"type": "message_delta",
             "delta": {"stop_reason": _STOP_REASON[result.completion.finish_reason], "stop_sequence": None},
             "usage": _usage(result, result.completion_tokens)}
    events.append(event("message_delta", delta))
    events.append(event("message_stop", {"type": "message_stop"}))
    return events


def count_tokens_body(n_tokens: int) -> dict[str, Any]:
    return {"input_tokens": n_tokens}
