"""OpenAI Chat Completions (`POST /v1/chat/completions`): request -> canonical messages, finished
call -> `chat.completion` body or `chat.completion.chunk` SSE stream (+ usage chunk, `[DONE]`); a
streamed answer sends its content in chunks as it is sampled, its tool calls at the end.

Handles system/developer/user/assistant/tool (and legacy function) roles, content as string or
parts, `tool_calls` with JSON-string arguments, replayed `reasoning_content`, function and custom
tools, `max_tokens` / `max_completion_tokens`, `stop`, `stream_options.include_usage`. Image, audio
and file parts become a `[<type>]` placeholder recorded in `meta["dropped"]` (wire.py's rule);
other part types are a 400.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, cast

from pydantic import BaseModel, ConfigDict, ValidationError

from harnessrl.proxy.canonical import CallResult, ChatRequest
from harnessrl.proxy.errors import bad_request, validation_message
from harnessrl.proxy.jsonutil import DecodeError, TooDeep, dumps_str, loads_bounded
from harnessrl.proxy.sse import DONE, data
from harnessrl.proxy.stream_text import Channel, Delta
from harnessrl.proxy.wire import Dropped, OpenAIWire, StreamEncoder, object_schema, type_of, unknown_block
from harnessrl.render.messages import Message, Role, ToolCall, ToolSpec

_TEXT_PARTS = frozenset({"text", "input_text", "output_text", "refusal"})
_PLACEHOLDER_PARTS = frozenset({"image_url", "input_image", "input_audio", "file", "input_file"})


class _Message(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    reasoning_content: str | None = None


class _Request(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str = ""
    messages: list[_Message]
    tools: list[dict[str, Any]] | None = None
    stream: bool | None = False
    stream_options: dict[str, Any] | None = None
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    stop: str | list[str] | None = None
    n: int | None = None
    tool_choice: Any = None
    parallel_tool_calls: bool | None = None


class OpenAIChat(OpenAIWire):
    name = "openai.chat"
    request_model = _Request  # the request body's schema (openapi.py)
    routes: ClassVar[tuple[str, ...]] = ("/v1/chat/completions",)

    def parse(self, body: Any) -> ChatRequest:
        try:
            req = _Request.model_validate(body)
        except ValidationError as e:
            raise bad_request(*validation_message(e)) from None
        if req.n not in (None, 1):
            raise bad_request("only n=1 is supported by this proxy", "n")
        stop = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
        max_tokens = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
        dropped = Dropped()
        return ChatRequest(
            messages=[_convert_message(m, i, dropped) for i, m in enumerate(req.messages)],
            tools=[_convert_tool(t, i) for i, t in enumerate(req.tools or [])],
            model=req.model,
            stream=bool(req.stream),
            temperature=req.temperature,
            top_p=req.top_p,
            max_tokens=max_tokens,
            stop=stop,
            include_usage=bool((req.stream_options or {}).get("include_usage")),
            extra={"tool_choice": req.tool_choice, "parallel_tool_calls": req.parallel_tool_calls},
            dropped=dropped.items,
        )

    def respond(self, result: CallResult, req: ChatRequest) -> dict[str, Any]:
        return response_body(result)

    def stream_encoder(self, head: CallResult, req: ChatRequest) -> StreamEncoder:
        return ChatStream(head, req)



class InProcessChat(OpenAIChat):
    """OpenAI Chat Completions requests made in the proxy's own process (the white-box agent loop,
    ProxyServer.call): the same parse, render and reply; recorded as protocol "whitebox"."""

    name = "whitebox"
    routes: ClassVar[tuple[str, ...]] = ()

def _text_of(content: str | list[dict[str, Any]] | None, where: str, dropped: Dropped) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    parts = []
    for j, part in enumerate(content):
        kind = type_of(part, f"{where}.{j}")
        if kind in _TEXT_PARTS:
            parts.append(str(part.get("text", part.get("refusal", ""))))
        elif kind in _PLACEHOLDER_PARTS:
            parts.append(dropped.placeholder(f"{where}.{j}", kind))
        else:
            raise unknown_block(f"{where}.{j}", kind)
    return "".join(parts)


def parse_arguments(raw: Any) -> Any:
    """Tool-call arguments: JSON text -> value; text that is not JSON (or nested past the body's
    depth limit) stays a string."""
    if not isinstance(raw, str):
        return raw
    try:
        return loads_bounded(raw)
    except (DecodeError, TooDeep):
        return raw


def _convert_message(m: _Message, i: int, dropped: Dropped) -> Message:
    role = cast(Role, {"developer": "system", "function": "tool"}.get(m.role, m.role))  # _Message checked it
    msg = Message(role=role, content=_text_of(m.content, f"messages.{i}.content", dropped),
                  name=m.name if role == "tool" else None)
    if role == "tool":
        msg.tool_call_id = m.tool_call_id or m.name
    if role == "assistant":
        msg.reasoning = m.reasoning_content
        for j, tc in enumerate(m.tool_calls or []):
            msg.tool_calls.append(_convert_tool_call(tc, f"messages.{i}.tool_calls.{j}"))
    return msg


def _convert_tool_call(tc: dict[str, Any], where: str) -> ToolCall:
    if tc.get("type") == "custom" or "custom" in tc:
        fn = tc.get("custom") or {}
        return ToolCall(id=str(tc.get("id", "")), name=str(fn.get("name", "")), arguments=fn.get("input", ""),
                        kind="custom")
    fn = tc.get("function")
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise bad_request(f"invalid request: {where}.function.name is required", f"{where}.function.name")
    return ToolCall(id=str(tc.get("id", "")), name=fn["name"], arguments=parse_arguments(fn.get("arguments", "{}")))


def _convert_tool(tool: dict[str, Any], i: int) -> ToolSpec:
    kind = type_of(tool, f"tools.{i}", "function") or "function"
    inner = tool.get(kind)
    spec: dict[str, Any] = inner if isinstance(inner, dict) else tool
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        raise bad_request(f"invalid request: tools.{i}.{kind}.name is required", f"tools.{i}.{kind}.name")
    if kind == "custom":
        return ToolSpec(name=name, description=str(spec.get("description", "")), parameters={}, kind="custom")
    return ToolSpec(name=name, description=str(spec.get("description", "")),
                    parameters=object_schema(spec.get("parameters"), f"tools.{i}.{kind}.parameters"))


# -- responses ----------------------------------------------------------------------------------


def _arguments_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else dumps_str(arguments)


def _tool_calls(result: CallResult) -> list[dict[str, Any]]:
    out = []
    for tc in result.completion.tool_calls:
        if tc.kind == "custom":
            out.append({"id": tc.id, "type": "custom", "custom": {"name": tc.name, "input": _arguments_text(tc.arguments)}})
        else:
            out.append({"id": tc.id, "type": "function",
                        "function": {"name": tc.name, "arguments": _arguments_text(tc.arguments)}})
    return out


def _usage(result: CallResult) -> dict[str, int]:
    return {"prompt_tokens": result.prompt_tokens, "completion_tokens": result.completion_tokens,
            "total_tokens": result.prompt_tokens + result.completion_tokens}


def response_body(result: CallResult) -> dict[str, Any]:
    c = result.completion
    message: dict[str, Any] = {"role": "assistant", "content": c.content or (None if c.tool_calls else "")}
    if c.reasoning:
        message["reasoning_content"] = c.reasoning
    if c.tool_calls:
        message["tool_calls"] = _tool_calls(result)
    return {"id": f"chatcmpl-{result.call_id}", "object": "chat.completion", "created": result.created,
            "model": result.model,
            "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": c.finish_reason}],
            "usage": _usage(result)}


class ChatStream(StreamEncoder):
    """`chat.completion.chunk`s: the role, one chunk per delta, the tool calls, the finish, usage, [DONE]."""

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {**self._head(), "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        if self.req.include_usage:
            body["usage"] = None
        return data(body)

    def _head(self) -> dict[str, Any]:
        return {"id": f"chatcmpl-{self.head.call_id}", "object": "chat.completion.chunk", "created": self.head.created,
                "model": self.head.model}

    def open(self) -> list[bytes]:
        return [self._chunk({"role": "assistant", "content": ""})]

    def delta(self, channel: Channel, text: str) -> list[bytes]:
        return [self._chunk({"reasoning_content" if channel == "reasoning" else "content": text})]

    def close(self, result: CallResult, rest: list[Delta]) -> list[bytes]:
        events = [event for channel, text in rest for event in self.delta(channel, text)]
        for i, tc in enumerate(_tool_calls(result)):
            kind = tc["type"]
            field = "input" if kind == "custom" else "arguments"
            start = {"index": i, "id": tc["id"], "type": kind, kind: {"name": tc[kind]["name"], field: ""}}
            events.append(self._chunk({"tool_calls": [start]}))
            events.append(self._chunk({"tool_calls": [{"index": i, kind: {field: tc[kind][field]}}]}))
        events.append(self._chunk({}, result.completion.finish_reason))
        if self.req.include_usage:
            events.append(data({**self._head(), "choices": [], "usage": _usage(result)}))
        events.append(DONE)
        return events

