"""OpenAI Responses (`POST /v1/responses`): input items -> canonical messages, finished call ->
`response` body or its SSE events (response.created ... response.completed): a streamed answer
sends its output text as it is sampled, its reasoning item and tool calls whole.

Consecutive reasoning / assistant message / function_call / custom_tool_call items form one
assistant turn. Reasoning text travels in `encrypted_content` (Codex asks for it and drops the
plain `content` when it resends history). `previous_response_id` is refused: the proxy keeps no
server-side conversation, clients resend the full input (Codex does). Image, file and audio parts
become a `[<type>]` placeholder, other item types (hosted tool calls, references) are dropped;
both are recorded in `meta["dropped"]` (wire.py's rule). Unknown content part types are a 400.
"""

from __future__ import annotations

import base64
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from harnessrl.proxy.canonical import CallResult, ChatRequest
from harnessrl.proxy.errors import bad_request, validation_message
from harnessrl.proxy.jsonutil import dumps_str
from harnessrl.proxy.openai_chat import parse_arguments
from harnessrl.proxy.sse import event
from harnessrl.proxy.stream_text import Channel, Delta
from harnessrl.proxy.wire import Dropped, OpenAIWire, StreamEncoder, object_schema, type_of, unknown_block
from harnessrl.render.messages import Message, ToolCall, ToolSpec

_REASONING_PREFIX = "harnessrl:"
_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text", "refusal"})
_PLACEHOLDER_PARTS = frozenset({"input_image", "input_file", "input_audio"})
_TURN_ITEMS = frozenset({"message", "reasoning", "function_call", "custom_tool_call"})
_OUTPUT_ITEMS = frozenset({"function_call_output", "custom_tool_call_output"})


class _Request(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str = ""
    input: str | list[dict[str, Any]]
    instructions: str | None = None
    tools: list[dict[str, Any]] | None = None
    stream: bool | None = False
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    tool_choice: Any = None
    parallel_tool_calls: bool | None = None
    previous_response_id: str | None = None


class OpenAIResponses(OpenAIWire):
    name = "openai.responses"
    request_model = _Request  # the request body's schema (openapi.py)
    routes = ("/v1/responses",)

    def parse(self, body: Any) -> ChatRequest:
        try:
            req = _Request.model_validate(body)
        except ValidationError as e:
            raise bad_request(*validation_message(e)) from None
        if req.previous_response_id:
            raise bad_request("previous_response_id is not supported: resend the full input", "previous_response_id")
        dropped = Dropped()
        messages = [Message(role="system", content=req.instructions)] if req.instructions else []
        if isinstance(req.input, str):
            messages.append(Message(role="user", content=req.input))
        else:
            messages.extend(_convert_items(req.input, dropped))
        tools = [t for t in (_convert_tool(t, i) for i, t in enumerate(req.tools or [])) if t is not None]
        return ChatRequest(
            messages=messages, tools=tools, model=req.model, stream=bool(req.stream),
            temperature=req.temperature, top_p=req.top_p, max_tokens=req.max_output_tokens,
            extra={"tool_choice": req.tool_choice if req.tool_choice is not None else "auto",
                   "parallel_tool_calls": req.parallel_tool_calls if req.parallel_tool_calls is not None else True,
                   "tools": req.tools or [], "custom_tools": sorted(t.name for t in tools if t.kind == "custom")},
            dropped=dropped.items,
        )

    def respond(self, result: CallResult, req: ChatRequest) -> dict[str, Any]:
        return response_body(result, req)

    def stream_encoder(self, head: CallResult, req: ChatRequest) -> StreamEncoder:
        return ResponseStream(head, req)


def _text_of(content: Any, where: str, dropped: Dropped | None) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        return str(content)
    parts = []
    for j, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        kind = kind if isinstance(kind, str) else None
        if kind in _TEXT_PARTS:
            parts.append(str(part.get("text", part.get("refusal", ""))))
        elif kind in _PLACEHOLDER_PARTS and dropped is not None:
            parts.append(dropped.placeholder(f"{where}.{j}", kind))
        elif dropped is not None:
            raise unknown_block(f"{where}.{j}", kind)
    return "".join(parts)


def decode_reasoning(item: dict[str, Any]) -> str:
    """Reasoning text of a resent reasoning item: ours from encrypted_content, else content/summary text."""
    enc = item.get("encrypted_content")
    if isinstance(enc, str) and enc.startswith(_REASONING_PREFIX):
        try:
            return base64.b64decode(enc[len(_REASONING_PREFIX):]).decode()
        except ValueError:
            pass
    return _text_of(item.get("content"), "", None) or _text_of(item.get("summary"), "", None)


def _convert_items(items: list[dict[str, Any]], dropped: Dropped) -> list[Message]:
    out: list[Message] = []
    turn: Message | None = None  # the assistant turn being assembled
    for i, item in enumerate(items):
        kind = type_of(item, f"input.{i}", "message")
        role = item.get("role")
        where = f"input.{i}"
        if kind == "message" and role != "assistant":
            turn = None
            if role not in ("user", "system", "developer"):
                raise bad_request(f"invalid request: {where}.role must be user, system, developer or assistant",
                                  f"{where}.role")
            out.append(Message(role="user" if role == "user" else "system",
                               content=_text_of(item.get("content"), f"{where}.content", dropped)))
        elif kind in _OUTPUT_ITEMS:
            turn = None
            if not isinstance(item.get("call_id"), str):
                raise bad_request(f"invalid request: {where}.call_id is required", f"{where}.call_id")
            out.append(Message(role="tool", content=_text_of(item.get("output"), f"{where}.output", dropped),
                               tool_call_id=item["call_id"]))
        elif kind in _TURN_ITEMS:
            if turn is None or (kind == "reasoning" and (turn.content or turn.tool_calls)):
                turn = Message(role="assistant")
                out.append(turn)
            _add_to_turn(turn, kind, item, where, dropped)
        else:  # hosted tool calls, item references, ...: nothing the policy wrote or can read
            dropped.skip(where, str(kind)[:80])
    return out


def _add_to_turn(turn: Message, kind: str, item: dict[str, Any], where: str, dropped: Dropped) -> None:
    if kind == "reasoning":
        turn.reasoning = (turn.reasoning or "") + decode_reasoning(item)
    elif kind == "message":
        turn.content += _text_of(item.get("content"), f"{where}.content", dropped)
    else:
        if not isinstance(item.get("name"), str) or not isinstance(item.get("call_id"), str):
            raise bad_request(f"invalid request: {where} needs a string name and call_id", where)
        if kind == "function_call":
            turn.tool_calls.append(ToolCall(id=item["call_id"], name=item["name"],
                                            arguments=parse_arguments(item.get("arguments", "{}"))))
        else:
            turn.tool_calls.append(ToolCall(id=item["call_id"], name=item["name"],
                                            arguments=str(item.get("input", "")), kind="custom"))


def _convert_tool(tool: dict[str, Any], i: int) -> ToolSpec | None:
    kind = tool.get("type", "function")
    if kind not in ("function", "custom"):
        return None  # hosted tools (web_search, ...) have no local implementation
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise bad_request(f"invalid request: tools.{i}.name is required", f"tools.{i}.name")
    if kind == "custom":
        params = {"format": tool.get("format")}
    else:
        params = object_schema(tool.get("parameters"), f"tools.{i}.parameters")
    return ToolSpec(name=name, description=str(tool.get("description", "")), parameters=params, kind=kind)


# -- responses ----------------------------------------------------------------------------------


def output_items(result: CallResult, custom_tools: list[str]) -> list[dict[str, Any]]:
    c, cid = result.completion, result.call_id
    items: list[dict[str, Any]] = []
    if c.reasoning:
        items.append(_reasoning_item(cid, c.reasoning))
    if c.content or not c.tool_calls:  # an empty reply is still one (empty) assistant message
        items.append(_message_item(cid, c.content))
    for j, tc in enumerate(c.tool_calls):
        if tc.kind == "custom" or tc.name in custom_tools:
            raw = tc.arguments.get("input", dumps_str(tc.arguments)) if isinstance(tc.arguments, dict) else tc.arguments
            items.append({"type": "custom_tool_call", "id": f"ctc_{cid}_{j}", "call_id": tc.id, "name": tc.name,
                          "input": raw if isinstance(raw, str) else dumps_str(raw), "status": "completed"})
        else:
            args = tc.arguments if isinstance(tc.arguments, str) else dumps_str(tc.arguments)
            items.append({"type": "function_call", "id": f"fc_{cid}_{j}", "call_id": tc.id, "name": tc.name,
                          "arguments": args, "status": "completed"})
    return items


def _reasoning_item(cid: str, text: str) -> dict[str, Any]:
    enc = _REASONING_PREFIX + base64.b64encode(text.encode()).decode()
    return {"type": "reasoning", "id": f"rs_{cid}", "summary": [],
            "content": [{"type": "reasoning_text", "text": text}], "encrypted_content": enc}


def _message_item(cid: str, text: str) -> dict[str, Any]:
    return {"type": "message", "id": f"msg_{cid}", "status": "completed", "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}]}


def _response(result: CallResult, req: ChatRequest, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
    done = status != "in_progress"
    incomplete = status == "incomplete"
    return {
        "id": f"resp_{result.call_id}", "object": "response", "created_at": result.created, "status": status,
        "model": result.model, "output": output, "error": None,
        "incomplete_details": {"reason": "max_output_tokens"} if incomplete else None,
        "instructions": None, "metadata": {}, "parallel_tool_calls": req.extra.get("parallel_tool_calls", True),
        "tool_choice": req.extra.get("tool_choice", "auto"), "tools": req.extra.get("tools", []),
        "temperature": req.temperature, "top_p": req.top_p, "max_output_tokens": req.max_tokens,
        "text": {"format": {"type": "text"}},
        "usage": {"input_tokens": result.prompt_tokens, "input_tokens_details": {"cached_tokens": 0},
                  "output_tokens": result.completion_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": result.prompt_tokens + result.completion_tokens} if done else None,
    }


def _final_status(result: CallResult) -> str:
    return "incomplete" if result.completion.finish_reason == "length" else "completed"


def response_body(result: CallResult, req: ChatRequest) -> dict[str, Any]:
    return _response(result, req, _final_status(result), output_items(result, req.extra.get("custom_tools", [])))


class ResponseStream(StreamEncoder):
    """response.created, response.in_progress; per output item: added, its deltas, done (the message
    item's output_text deltas as they are sampled); response.completed (or .incomplete)."""

    def __init__(self, head: CallResult, req: ChatRequest):
        super().__init__(head, req)
        self._seq = 0  # sequence_number of the next event
        self._items = 0  # output items started so far
        self._message: str | None = None  # the text of the message item while it is open

    def _emit(self, name: str, payload: dict[str, Any]) -> bytes:
        self._seq += 1
        return event(name, {"type": name, "sequence_number": self._seq - 1, **payload})

    def open(self) -> list[bytes]:
        pending = _response(self.head, self.req, "in_progress", [])
        return [self._emit("response.created", {"response": pending}),
                self._emit("response.in_progress", {"response": pending})]

    def _where(self) -> dict[str, Any]:
        return {"item_id": f"msg_{self.head.call_id}", "output_index": self._items - 1, "content_index": 0}

    def delta(self, channel: Channel, text: str) -> list[bytes]:
        if channel == "reasoning":
            return self._item(_reasoning_item(self.head.call_id, text))
        events = []
        if self._message is None:
            item = _message_item(self.head.call_id, "")
            self._items += 1
            added = {"output_index": self._items - 1, "item": _pending(item)}
            events += [self._emit("response.output_item.added", added),
                       self._emit("response.content_part.added", {**self._where(), "part": item["content"][0]})]
            self._message = ""
        self._message += text
        return events + [self._emit("response.output_text.delta", {**self._where(), "delta": text, "logprobs": []})]

    def close(self, result: CallResult, rest: list[Delta]) -> list[bytes]:
        items = output_items(result, self.req.extra.get("custom_tools", []))
        done = self._items  # the items sent whole so far, plus the open message
        events = []
        if self._message is not None:
            events += [e for channel, text in rest if channel == "text" for e in self.delta(channel, text)]
            item, where = items[done - 1], self._where()
            events += [self._emit("response.output_text.done", {**where, "text": self._message, "logprobs": []}),
                       self._emit("response.content_part.done", {**where, "part": item["content"][0]}),
                       self._emit("response.output_item.done", {"output_index": done - 1, "item": item})]
        for item in items[done:]:
            events += self._item(item)
        status = _final_status(result)
        return events + [self._emit(f"response.{status}", {"response": _response(result, self.req, status, items)})]

    def _item(self, item: dict[str, Any]) -> list[bytes]:
        """One output item sent whole: added, its deltas, done."""
        idx, events = self._items, []
        self._items += 1

        def emit(name: str, payload: dict[str, Any]) -> None:
            events.append(self._emit(name, payload))

        emit("response.output_item.added", {"output_index": idx, "item": _pending(item)})
        _item_deltas(emit, idx, item)
        emit("response.output_item.done", {"output_index": idx, "item": item})
        return events


def _pending(item: dict[str, Any]) -> dict[str, Any]:
    kind = item["type"]
    if kind == "message":
        return {**item, "status": "in_progress", "content": []}
    if kind == "function_call":
        return {**item, "status": "in_progress", "arguments": ""}
    if kind == "custom_tool_call":
        return {**item, "status": "in_progress", "input": ""}
    return item


def _item_deltas(emit: Any, idx: int, item: dict[str, Any]) -> None:
    kind, iid = item["type"], item["id"]
    if kind == "message":
        part, text = item["content"][0], item["content"][0]["text"]
        where = {"item_id": iid, "output_index": idx, "content_index": 0}
        emit("response.content_part.added", {**where, "part": {**part, "text": ""}})
        emit("response.output_text.delta", {**where, "delta": text, "logprobs": []})
        emit("response.output_text.done", {**where, "text": text, "logprobs": []})
        emit("response.content_part.done", {**where, "part": part})
    elif kind == "function_call":
        emit("response.function_call_arguments.delta", {"item_id": iid, "output_index": idx, "delta": item["arguments"]})
        emit("response.function_call_arguments.done", {"item_id": iid, "output_index": idx,
                                                       "arguments": item["arguments"]})
    elif kind == "custom_tool_call":
        emit("response.custom_tool_call_input.delta", {"item_id": iid, "output_index": idx, "delta": item["input"]})
        emit("response.custom_tool_call_input.done", {"item_id": iid, "output_index": idx, "input": item["input"]})
