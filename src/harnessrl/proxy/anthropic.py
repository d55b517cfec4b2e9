"""Anthropic Messages (`POST /v1/messages`, `/v1/messages/count_tokens`): request -> canonical
messages, finished call -> response body, or SSE events as the reply is sampled (text deltas as they
come, tool_use blocks at the end); Anthropic's error shape.

Lenient to unknown top-level fields (Claude Code sends `cache_control`, `metadata`,
`context_management`, `output_config`, ...). `system` may be a string or text blocks; `role:"system"`
messages inside `messages` are kept in place; thinking blocks carry their signature in `meta`.
Content blocks: text, thinking, tool_use and tool_result are read; image, document and
search_result become a `[<type>]` placeholder (wire.py's rule); redacted thinking and server-tool
blocks are dropped; both are recorded in `meta["dropped"]`. Any other block type is a 400.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from harnessrl.proxy.canonical import CallResult, ChatRequest
from harnessrl.proxy.errors import ProxyError, bad_request, validation_message
from harnessrl.proxy.jsonutil import dumps, dumps_str
from harnessrl.proxy.sse import event
from harnessrl.proxy.stream_text import Channel, Delta
from harnessrl.proxy.wire import (Dropped, StreamEncoder, WireProtocol, object_schema, type_of, unknown_block,
                                  whole_reply)
from harnessrl.render.messages import Message, ToolCall, ToolSpec

_STOP_REASON = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}
_PLACEHOLDER_BLOCKS = frozenset({"image", "document", "search_result", "container_upload"})
_SKIPPED_BLOCKS = frozenset({"redacted_thinking", "server_tool_use", "web_search_tool_result",
                             "web_fetch_tool_result", "code_execution_tool_result", "mcp_tool_use",
                             "mcp_tool_result", "bash_code_execution_tool_result",
                             "text_editor_code_execution_tool_result"})
_ERROR_TYPE = {"invalid_request": "invalid_request_error", "too_long": "invalid_request_error",
               "auth": "authentication_error", "forbidden": "permission_error", "not_found": "not_found_error",
               "method_not_allowed": "invalid_request_error", "timeout": "timeout_error",
               "too_large": "request_too_large", "quota": "request_too_large", "call_budget": "invalid_request_error",
               "rate_limited": "rate_limit_error", "headers_too_large": "request_too_large",
               "overloaded": "overloaded_error", "internal": "api_error"}


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


class AnthropicMessages(WireProtocol):
    name = "anthropic.messages"
    request_model = _Request  # the request body's schema (openapi.py)
    routes = ("/v1/messages",)
    count_tokens_route: ClassVar[str] = "/v1/messages/count_tokens"
    keepalive = b'event: ping\ndata: {"type":"ping"}\n\n'

    def parse(self, body: Any) -> ChatRequest:
        try:
            req = _Request.model_validate(body)
        except ValidationError as e:
            raise bad_request(*validation_message(e)) from None
        dropped = Dropped()
        messages: list[Message] = []
        if req.system:
            messages.append(Message(role="system", content=_text_of(req.system, "system", dropped)))
        for i, m in enumerate(req.messages):
            messages.extend(_convert_message(m, f"messages.{i}", dropped))
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
            dropped=dropped.items,
        )

    def respond(self, result: CallResult, req: ChatRequest) -> dict[str, Any]:
        return response_body(result)

    def stream_encoder(self, head: CallResult, req: ChatRequest) -> StreamEncoder:
        return MessageStream(head, req)

    def error_status(self, err: ProxyError) -> int:
        return 529 if err.kind == "overloaded" else super().error_status(err)

    def error_body(self, err: ProxyError) -> dict[str, Any]:
        return {"type": "error", "error": {"type": _ERROR_TYPE[err.kind], "message": err.message}}

    def stream_error(self, err: ProxyError) -> bytes:
        return b"event: error\ndata: " + dumps(self.error_body(err)) + b"\n\n"

    def too_long(self, prompt_tokens: int, max_model_len: int) -> ProxyError:
        return ProxyError("too_long", f"prompt is too long: {prompt_tokens} tokens > {max_model_len} maximum",
                          "messages")

    @staticmethod
    def count_tokens_body(n_tokens: int) -> dict[str, Any]:
        return {"input_tokens": n_tokens}


def _text_of(content: str | list[dict[str, Any]], where: str, dropped: Dropped, first: int = 0) -> str:
    """Join the text of a string or a list of blocks (the wire.py rule for what is not text);
    `first`: the index of content[0] in the request (for field names)."""
    if isinstance(content, str):
        return content
    parts = []
    for j, block in enumerate(content, start=first):
        kind = type_of(block, f"{where}.{j}")
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise bad_request(f"invalid request: {where}.{j}.text must be a string", f"{where}.{j}.text")
            parts.append(text)
        elif kind in _PLACEHOLDER_BLOCKS:
            parts.append(dropped.placeholder(f"{where}.{j}", kind))
        elif kind is None:
            raise bad_request(f"invalid request: {where}.{j}: content block without a type", f"{where}.{j}.type")
        else:
            raise unknown_block(f"{where}.{j}", kind)
    return "\n".join(parts)


def _convert_message(m: _Message, where: str, dropped: Dropped) -> list[Message]:
    if m.role == "system":
        return [Message(role="system", content=_text_of(m.content, f"{where}.content", dropped))]
    if isinstance(m.content, str):
        return [Message(role=m.role, content=m.content)]
    if m.role == "assistant":
        return [_assistant_message(m.content, f"{where}.content", dropped)]
    return _user_messages(m.content, f"{where}.content", dropped)


def _assistant_message(blocks: list[dict[str, Any]], where: str, dropped: Dropped) -> Message:
    msg = Message(role="assistant")
    texts: list[str] = []
    for j, block in enumerate(blocks):
        kind = type_of(block, f"{where}.{j}")
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "thinking":
            msg.reasoning = (msg.reasoning or "") + str(block.get("thinking", ""))
            if block.get("signature"):
                msg.meta["signature"] = block["signature"]
        elif kind == "tool_use":
            msg.tool_calls.append(_tool_use(block, f"{where}.{j}"))
        elif kind in _SKIPPED_BLOCKS:
            dropped.skip(f"{where}.{j}", kind)
        elif kind is None:
            raise bad_request(f"invalid request: {where}.{j}: content block without a type", f"{where}.{j}.type")
        else:
            raise unknown_block(f"{where}.{j}", kind)
    msg.content = "".join(texts)
    return msg


def _tool_use(block: dict[str, Any], where: str) -> ToolCall:
    if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str):
        raise bad_request(f"invalid request: {where}: tool_use needs a string id and name", where)
    arguments = block.get("input", {})
    if not isinstance(arguments, dict):
        raise bad_request(f"invalid request: {where}.input must be a JSON object, got {type(arguments).__name__}",
                          f"{where}.input")
    return ToolCall(id=block["id"], name=block["name"], arguments=arguments)


def _user_messages(blocks: list[dict[str, Any]], where: str, dropped: Dropped) -> list[Message]:
    """A user turn: tool_result blocks become `tool` messages, the rest joins into user text (in order)."""
    out: list[Message] = []
    pending: list[dict[str, Any]] = []
    start = 0  # index of the first pending block (for field names)
    for j, block in enumerate(blocks):
        if block.get("type") != "tool_result":
            if not pending:
                start = j
            pending.append(block)
            continue
        if pending:
            out.append(Message(role="user", content=_text_of(pending, where, dropped, start)))
            pending = []
        if not isinstance(block.get("tool_use_id"), str):
            raise bad_request(f"invalid request: {where}.{j}: tool_result needs a tool_use_id", f"{where}.{j}")
        content = block.get("content", "")
        text = _text_of(content if isinstance(content, (str, list)) else str(content), f"{where}.{j}.content",
                        dropped)
        meta = {"is_error": True} if block.get("is_error") else {}
        out.append(Message(role="tool", content=text, tool_call_id=block["tool_use_id"], meta=meta))
    if pending or not out:
        out.append(Message(role="user", content=_text_of(pending, where, dropped, start)))
    return out


def _convert_tool(tool: dict[str, Any], i: int) -> ToolSpec:
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise bad_request(f"invalid request: tools.{i}.name is required", f"tools.{i}.name")
    return ToolSpec(name=name, description=str(tool.get("description", "")),
                    parameters=object_schema(tool.get("input_schema"), f"tools.{i}.input_schema"))


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


class MessageStream(StreamEncoder):
    """message_start; a thinking block (sent whole), a text block (one text_delta per delta), the
    tool_use blocks, each start/delta(s)/stop; message_delta, message_stop."""

    def __init__(self, head: CallResult, req: ChatRequest):
        super().__init__(head, req)
        self._index = -1  # the block open now (or the last one)
        self._open: str | None = None  # its type while open

    def open(self) -> list[bytes]:
        return [event("message_start", {"type": "message_start", "message": _message(self.head, [], None, 1)})]

    def delta(self, channel: Channel, text: str) -> list[bytes]:
        kind = "thinking" if channel == "reasoning" else "text"
        events: list[bytes] = []
        if self._open != kind:
            block = ({"type": "thinking", "thinking": "", "signature": ""} if kind == "thinking"
                     else {"type": "text", "text": ""})
            events = self._close_block() + self._start(block)
        return events + [self._delta({"type": f"{kind}_delta", kind: text})]

    def close(self, result: CallResult, rest: list[Delta]) -> list[bytes]:
        events = [e for channel, text in rest for e in self.delta(channel, text)] + self._close_block()
        for tc in result.completion.tool_calls:
            events += self._start({"type": "tool_use", "id": tc.id, "name": tc.name, "input": {}})
            partial = dumps_str(_tool_input(tc.arguments))
            events.append(self._delta({"type": "input_json_delta", "partial_json": partial}))
            events += self._close_block()
        delta = {"type": "message_delta",
                 "delta": {"stop_reason": _STOP_REASON[result.completion.finish_reason], "stop_sequence": None},
                 "usage": _usage(result, result.completion_tokens)}
        return events + [event("message_delta", delta), event("message_stop", {"type": "message_stop"})]

    def _start(self, block: dict[str, Any]) -> list[bytes]:
        self._index += 1
        self._open = block["type"]
        start = {"type": "content_block_start", "index": self._index, "content_block": block}
        return [event("content_block_start", start)]

    def _delta(self, delta: dict[str, Any]) -> bytes:
        return event("content_block_delta", {"type": "content_block_delta", "index": self._index, "delta": delta})

    def _close_block(self) -> list[bytes]:
        if self._open is None:
            return []
        events = []
        if self._open == "thinking":
            events.append(self._delta({"type": "signature_delta", "signature": _signature(self.head)}))
        self._open = None
        return events + [event("content_block_stop", {"type": "content_block_stop", "index": self._index})]


def stream_events(result: CallResult) -> list[bytes]:
    """The whole answer as one stream (nothing sent before its end)."""
    stream = MessageStream(result, ChatRequest([], [], result.model, stream=True))
    return stream.open() + stream.close(result, whole_reply(result))
