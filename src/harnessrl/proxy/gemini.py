"""Gemini API (`POST /v1beta/models/{model}:generateContent`, `:streamGenerateContent?alt=sse`,
`:countTokens`): request -> canonical messages, finished call -> `GenerateContentResponse` or its
SSE stream (text chunks as they are sampled, function calls at the end); Google's error shape
`{"error": {"code", "message", "status"}}`.

The model and the method are in the path and `alt` in the query, so the app binds one instance per
request (`for_request`). Roles `user` and `model`; `systemInstruction` as a Content or a string.
Parts: `text` (`thought: true` on a model turn = its reasoning), `functionCall` (model turn),
`functionResponse` (user turn: one `tool` message each; its `response` object is the tool's text
when it is `{"output": <string>}` alone, else its JSON); `inlineData` / `fileData` become a
`[<type>]` placeholder and `executableCode` / `codeExecutionResult` are dropped, both recorded in
`meta["dropped"]` (wire.py's rule); any other part is a 400. `thoughtSignature` and part metadata
are accepted and ignored. Tools: `functionDeclarations` with `parameters` (OpenAPI types such as
"OBJECT" are lowered) or `parametersJsonSchema`; built-in tools (googleSearch, codeExecution, ...)
are dropped and recorded. `generationConfig`: temperature, topP, maxOutputTokens, stopSequences;
candidateCount must be 1. A rollout key may come in the path (`/r/<key>/v1beta/...`) or, on the
bare route, as `x-goog-api-key` / `?key=` (a registered key selects its rollout; any other is the
ad-hoc rollout, as on the other protocols' bare routes).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from harnessrl.proxy.canonical import CallResult, ChatRequest
from harnessrl.proxy.errors import ProxyError, bad_request, validation_message
from harnessrl.proxy.jsonutil import dumps, dumps_str
from harnessrl.proxy.stream_text import Channel, Delta
from harnessrl.proxy.wire import Dropped, StreamEncoder, WireProtocol, object_schema, whole_reply
from harnessrl.render.messages import Message, ToolCall, ToolSpec

ROUTE_PREFIX = "/v1beta/models/"
_PLACEHOLDER_PARTS = frozenset({"inlineData", "fileData"})
_SKIPPED_PARTS = frozenset({"executableCode", "codeExecutionResult"})
_DATA_PARTS = ("text", "functionCall", "functionResponse", *_PLACEHOLDER_PARTS, *_SKIPPED_PARTS)
_PART_METADATA = frozenset({"thought", "thoughtSignature", "videoMetadata", "partMetadata", "mediaResolution"})
_FINISH = {"stop": "STOP", "length": "MAX_TOKENS", "tool_calls": "STOP"}
_STATUS = {"invalid_request": "INVALID_ARGUMENT", "too_long": "INVALID_ARGUMENT", "auth": "UNAUTHENTICATED",
           "forbidden": "PERMISSION_DENIED", "not_found": "NOT_FOUND", "method_not_allowed": "INVALID_ARGUMENT",
           "timeout": "DEADLINE_EXCEEDED", "too_large": "INVALID_ARGUMENT", "quota": "RESOURCE_EXHAUSTED",
           "call_budget": "FAILED_PRECONDITION", "rate_limited": "RESOURCE_EXHAUSTED",
           "headers_too_large": "INVALID_ARGUMENT", "overloaded": "UNAVAILABLE", "internal": "INTERNAL"}
Method = Literal["generateContent", "streamGenerateContent", "countTokens"]


class _Content(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["user", "model", "function", "system"] | None = None
    parts: list[dict[str, Any]] = []


class _Request(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str = ""
    contents: list[_Content]
    systemInstruction: _Content | str | None = None
    tools: list[dict[str, Any]] | None = None
    toolConfig: dict[str, Any] | None = None
    generationConfig: dict[str, Any] | None = None


class GeminiGenerateContent(WireProtocol):
    name = "gemini.generate_content"
    request_model = _Request  # the request body's schema (openapi.py)
    routes = (ROUTE_PREFIX + "{model}:generateContent", ROUTE_PREFIX + "{model}:streamGenerateContent")
    count_tokens_route: ClassVar[str] = ROUTE_PREFIX + "{model}:countTokens"
    # whitespace, not an SSE comment: the @google/genai versions gemini-cli bundles match each event
    # with /^\s*data: .../ from the buffer's start, so a comment line would stall the whole stream
    keepalive = b"\n"

    def __init__(self, method: Method = "generateContent", model: str = "", sse: bool = True):
        self.method, self.model, self.sse = method, model, sse

    def owns(self, path: str) -> bool:
        return ROUTE_PREFIX in path

    def for_request(self, path: str, path_params: Mapping[str, str], query: Mapping[str, str]) -> WireProtocol:
        method: Method = ("streamGenerateContent" if path.endswith(":streamGenerateContent")
                          else "countTokens" if path.endswith(":countTokens") else "generateContent")
        bound = GeminiGenerateContent(method, path_params.get("model", ""), query.get("alt") == "sse")
        if method == "streamGenerateContent" and not bound.sse:
            raise bad_request("streamGenerateContent is served as server-sent events only: add ?alt=sse "
                              "to the URL (the Gemini SDKs do)", "alt")
        return bound

    def api_key(self, headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
        return headers.get("x-goog-api-key") or query.get("key") or None

    @property
    def streams(self) -> bool:
        return self.method == "streamGenerateContent"

    def parse(self, body: Any) -> ChatRequest:
        if isinstance(body, dict) and isinstance(body.get("generateContentRequest"), dict):  # countTokens form
            body = body["generateContentRequest"]
        try:
            req = _Request.model_validate(body)
        except ValidationError as e:
            raise bad_request(*validation_message(e)) from None
        cfg = req.generationConfig or {}
        if cfg.get("candidateCount") not in (None, 1):
            raise bad_request("invalid request: generationConfig.candidateCount: only 1 is supported by this proxy",
                              "generationConfig.candidateCount")
        dropped = Dropped()
        messages: list[Message] = []
        if req.systemInstruction is not None:
            system = req.systemInstruction
            text = system if isinstance(system, str) else _model_text(system.parts, "systemInstruction.parts",
                                                                      dropped, None)[0]
            messages.append(Message(role="system", content=text))
        for i, content in enumerate(req.contents):
            messages.extend(_convert_content(content, f"contents.{i}", dropped))
        stop = cfg.get("stopSequences") or []
        if not isinstance(stop, list) or not all(isinstance(s, str) for s in stop):
            raise bad_request("invalid request: generationConfig.stopSequences must be a list of strings",
                              "generationConfig.stopSequences")
        return ChatRequest(
            messages=messages, tools=_convert_tools(req.tools or [], dropped),
            model=self.model or _model_name(req.model), stream=self.streams,
            temperature=_number(cfg, "temperature"), top_p=_number(cfg, "topP"),
            max_tokens=_integer(cfg, "maxOutputTokens"), stop=list(stop),
            extra={"toolConfig": req.toolConfig}, dropped=dropped.items)

    def respond(self, result: CallResult, req: ChatRequest) -> dict[str, Any]:
        return response_body(result)

    def stream_encoder(self, head: CallResult, req: ChatRequest) -> StreamEncoder:
        return GeminiStream(head, req)

    def error_body(self, err: ProxyError) -> dict[str, Any]:
        return {"error": {"code": self.error_status(err), "message": err.message, "status": _STATUS[err.kind]}}

    def stream_error(self, err: ProxyError) -> bytes:
        # the genai SDK raises an ApiError on a stream chunk that is a JSON error object
        return dumps(self.error_body(err)) + b"\n"

    def too_long(self, prompt_tokens: int, max_model_len: int) -> ProxyError:
        return ProxyError("too_long", f"The input token count ({prompt_tokens}) exceeds the maximum number of "
                                      f"tokens allowed ({max_model_len}).", "contents")

    @staticmethod
    def count_tokens_body(n_tokens: int) -> dict[str, Any]:
        return {"totalTokens": n_tokens}


def _model_name(name: str) -> str:
    return name[len("models/"):] if name.startswith("models/") else name


def _number(cfg: dict[str, Any], key: str) -> float | None:
    value = cfg.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise bad_request(f"invalid request: generationConfig.{key} must be a number", f"generationConfig.{key}")
    return float(value)


def _integer(cfg: dict[str, Any], key: str) -> int | None:
    value = cfg.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise bad_request(f"invalid request: generationConfig.{key} must be an integer", f"generationConfig.{key}")
    return value


def _kind(part: Any, where: str) -> str:
    """The one data field of a part (text, functionCall, ...); a 400 naming the field otherwise."""
    if not isinstance(part, dict):
        raise bad_request(f"invalid request: {where} must be an object", where)
    kinds = [k for k in part if k in _DATA_PARTS]
    unknown = [k for k in part if k not in _DATA_PARTS and k not in _PART_METADATA]
    if unknown:
        raise bad_request(f"invalid request: {where}: unsupported part field {unknown[0][:80]!r}", f"{where}.{unknown[0]}")
    if len(kinds) != 1:
        raise bad_request(f"invalid request: {where} needs exactly one of {', '.join(_DATA_PARTS)}", where)
    return kinds[0]


def _model_text(parts: list[dict[str, Any]], where: str, dropped: Dropped, msg: Message | None,
                first: int = 0) -> tuple[str, Message | None]:
    """The text of non-function parts (joined as they come); thought parts go to `msg.reasoning`
    and functionCall parts to `msg.tool_calls` when a model turn is being read (`msg`). `first`:
    the index of parts[0] in the request (for field names)."""
    texts: list[str] = []
    for j, part in enumerate(parts, start=first):
        at = f"{where}.{j}"
        kind = _kind(part, at)
        if kind == "text":
            text = part["text"]
            if not isinstance(text, str):
                raise bad_request(f"invalid request: {at}.text must be a string", f"{at}.text")
            if part.get("thought") and msg is not None:
                msg.reasoning = (msg.reasoning or "") + text
            else:
                texts.append(text)
        elif kind == "functionCall" and msg is not None:
            msg.tool_calls.append(_function_call(part["functionCall"], f"{at}.functionCall"))
        elif kind in _PLACEHOLDER_PARTS:
            texts.append(dropped.placeholder(at, kind))
        elif kind in _SKIPPED_PARTS:
            dropped.skip(at, kind)
        else:
            raise bad_request(f"invalid request: {at}: {kind} is not allowed here", f"{at}.{kind}")
    return "".join(texts), msg


def _function_call(call: Any, where: str) -> ToolCall:
    if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"]:
        raise bad_request(f"invalid request: {where}.name is required", f"{where}.name")
    args = call.get("args", {})
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise bad_request(f"invalid request: {where}.args must be a JSON object", f"{where}.args")
    return ToolCall(id=str(call.get("id") or ""), name=call["name"], arguments=args)


def _convert_content(content: _Content, where: str, dropped: Dropped) -> list[Message]:
    if content.role == "model":
        text, msg = _model_text(content.parts, f"{where}.parts", dropped, Message(role="assistant"))
        assert msg is not None
        msg.content = text
        return [msg]
    if content.role == "system":
        return [Message(role="system", content=_model_text(content.parts, f"{where}.parts", dropped, None)[0])]
    return _user_messages(content.parts, f"{where}.parts", dropped)


def _user_messages(parts: list[dict[str, Any]], where: str, dropped: Dropped) -> list[Message]:
    """A user (or function) turn: each functionResponse becomes a `tool` message, the other parts
    between them join into user text (in order)."""
    out: list[Message] = []
    pending: list[dict[str, Any]] = []
    start = 0  # index of the first pending part (for field names)
    for j, part in enumerate(parts):
        if _kind(part, f"{where}.{j}") != "functionResponse":
            if not pending:
                start = j
            pending.append(part)
            continue
        if pending:
            out.append(Message(role="user", content=_model_text(pending, where, dropped, None, start)[0]))
            pending = []
        out.append(_function_response(part["functionResponse"], f"{where}.{j}.functionResponse"))
    if pending or not out:
        out.append(Message(role="user", content=_model_text(pending, where, dropped, None, start)[0]))
    return out


def _function_response(resp: Any, where: str) -> Message:
    if not isinstance(resp, dict) or not isinstance(resp.get("name"), str):
        raise bad_request(f"invalid request: {where}.name is required", f"{where}.name")
    body = resp.get("response", {})
    if isinstance(body, dict) and set(body) == {"output"} and isinstance(body["output"], str):
        text = body["output"]
    else:
        text = body if isinstance(body, str) else dumps_str(body)
    meta = {"is_error": True} if isinstance(body, dict) and set(body) == {"error"} else {}
    return Message(role="tool", content=text, tool_call_id=str(resp.get("id") or resp["name"]), name=resp["name"],
                   meta=meta)


def _lower_types(schema: Any) -> Any:
    """An OpenAPI-style schema (`"type": "OBJECT"`) as JSON schema (`"type": "object"`)."""
    if isinstance(schema, list):
        return [_lower_types(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _lower_types(v) for k, v in schema.items()}
    if isinstance(out.get("type"), str):
        out["type"] = out["type"].lower()
    return out


def _convert_tools(tools: list[dict[str, Any]], dropped: Dropped) -> list[ToolSpec]:
    out: list[ToolSpec] = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise bad_request(f"invalid request: tools.{i} must be an object", f"tools.{i}")
        for key, value in tool.items():
            if key != "functionDeclarations":
                dropped.skip(f"tools.{i}.{key}", key)  # a built-in tool the policy cannot call
                continue
            if not isinstance(value, list):
                raise bad_request(f"invalid request: tools.{i}.functionDeclarations must be a list",
                                  f"tools.{i}.functionDeclarations")
            out.extend(_declaration(d, f"tools.{i}.functionDeclarations.{j}") for j, d in enumerate(value))
    return out


def _declaration(decl: Any, where: str) -> ToolSpec:
    if not isinstance(decl, dict) or not isinstance(decl.get("name"), str) or not decl["name"]:
        raise bad_request(f"invalid request: {where}.name is required", f"{where}.name")
    if decl.get("parametersJsonSchema") is not None:
        schema = object_schema(decl["parametersJsonSchema"], f"{where}.parametersJsonSchema")
    else:
        schema = object_schema(_lower_types(decl.get("parameters")), f"{where}.parameters")
    return ToolSpec(name=decl["name"], description=str(decl.get("description", "")), parameters=schema)


# -- responses ----------------------------------------------------------------------------------


def _text_part(channel: Channel, text: str) -> dict[str, Any]:
    return {"text": text, "thought": True} if channel == "reasoning" else {"text": text}


def _parts(result: CallResult, text: list[Delta] | None = None) -> list[dict[str, Any]]:
    """The reply's parts: its reasoning and content (or the pieces `text` of them), its function calls."""
    parts = [_text_part(channel, piece) for channel, piece in (whole_reply(result) if text is None else text)]
    for tc in result.completion.tool_calls:
        args = tc.arguments if isinstance(tc.arguments, dict) else {"input": tc.arguments}
        parts.append({"functionCall": {"id": tc.id, "name": tc.name, "args": args}})
    return parts


def _usage(result: CallResult) -> dict[str, int]:
    return {"promptTokenCount": result.prompt_tokens, "candidatesTokenCount": result.completion_tokens,
            "totalTokenCount": result.prompt_tokens + result.completion_tokens}


def _chunk(result: CallResult, parts: list[dict[str, Any]], finish: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    body: dict[str, Any] = {"candidates": [candidate]}
    if finish:
        candidate["finishReason"] = _FINISH[result.completion.finish_reason]
        body["usageMetadata"] = _usage(result)
    body.update(modelVersion=result.model, responseId=result.call_id)
    return body


def response_body(result: CallResult) -> dict[str, Any]:
    return _chunk(result, _parts(result) or [{"text": ""}], finish=True)


class GeminiStream(StreamEncoder):
    """One `data:` chunk per delta as it is sampled; at the end one per part left (the content's
    rest, each function call), the last with finishReason and usageMetadata."""

    def open(self) -> list[bytes]:
        return []

    def delta(self, channel: Channel, text: str) -> list[bytes]:
        return [_event(_chunk(self.head, [_text_part(channel, text)], finish=False))]

    def close(self, result: CallResult, rest: list[Delta]) -> list[bytes]:
        parts = _parts(result, rest) or [{"text": ""}]
        return [_event(_chunk(result, [part], finish=i == len(parts) - 1)) for i, part in enumerate(parts)]


def _event(chunk: dict[str, Any]) -> bytes:
    return b"data: " + dumps(chunk) + b"\r\n\r\n"
