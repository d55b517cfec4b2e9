"""`WireProtocol`: everything about one HTTP API the proxy speaks, in one class.

A wire protocol owns its routes, request parsing (body -> `ChatRequest`), response and SSE
encoding (`CallResult` -> body; a `StreamEncoder` -> events as the reply grows), its keepalive bytes, and its error shape and statuses.
The app (app.py) and the call handler (calls.py) are generic over it; protocols.py lists the four
the proxy serves: Anthropic Messages, OpenAI Chat Completions, OpenAI Responses and the Gemini API.
A protocol whose request settings live in the URL (Gemini: the model and the method in the path,
`alt` in the query) returns a bound copy of itself from `for_request`.

(A "tool format" in render/ is a different thing: how the model writes tool calls in text.)

Inputs a text-only policy cannot see (images, documents, audio, files) are accepted by one rule:
each becomes a placeholder text `[<type>]` in the prompt and the stored call lists it under
`meta["dropped"]`, so the record shows what the model really saw. Other content the protocol
does not define is refused with a 400 that names the field.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from harnessrl.proxy.canonical import CallResult, ChatRequest
from harnessrl.proxy.errors import STATUS, ProxyError, bad_request
from harnessrl.proxy.jsonutil import dumps
from harnessrl.proxy.stream_text import Channel, Delta

if TYPE_CHECKING:
    from pydantic import BaseModel


class WireProtocol(ABC):
    name: ClassVar[str]  # stored in CallRecord.protocol
    request_model: ClassVar[type[BaseModel]]  # the pydantic model of a request body (its JSON schema: openapi.py)
    routes: ClassVar[tuple[str, ...]]  # model-call routes (under "" and "/r/{key}")
    keepalive: ClassVar[bytes]  # what a slow stream sends while the engine works
    count_tokens_route: ClassVar[str | None] = None  # a token-count route (answered by count_tokens_body)

    # -- routing -------------------------------------------------------------------------------

    def owns(self, path: str) -> bool:
        """Whether `path` is (or starts) one of this protocol's routes (for the error shape)."""
        return any(route in path for route in self.routes)

    def for_request(self, path: str, path_params: Mapping[str, str], query: Mapping[str, str]) -> WireProtocol:
        """This protocol bound to one request's URL (ProxyError 400 on a URL it cannot serve)."""
        return self

    def api_key(self, headers: Mapping[str, str], query: Mapping[str, str]) -> str | None:
        """The rollout key a client sent outside the path (only protocols whose clients cannot put it there)."""
        return None

    @property
    def streams(self) -> bool:
        """True when the route itself asks for a stream (the body's `stream` field is not read)."""
        return False

    @staticmethod
    def count_tokens_body(n_tokens: int) -> dict[str, Any]:
        return {"input_tokens": n_tokens}

    # -- requests ------------------------------------------------------------------------------

    @abstractmethod
    def parse(self, body: object) -> ChatRequest:
        """A decoded JSON value -> ChatRequest (ProxyError 400 naming the field on bad input)."""

    # -- answers -------------------------------------------------------------------------------

    @abstractmethod
    def respond(self, result: CallResult, req: ChatRequest) -> dict[str, Any]:
        """The non-streamed response body (also what the store keeps as the call's response)."""

    @abstractmethod
    def stream_encoder(self, head: CallResult, req: ChatRequest) -> StreamEncoder:
        """The encoder of one streamed answer (`head`: the call's result before anything is sampled)."""

    def stream(self, result: CallResult, req: ChatRequest) -> list[bytes]:
        """The complete SSE event sequence of an answer streamed at once (nothing sent before its end)."""
        encoder = self.stream_encoder(result, req)
        return encoder.open() + encoder.close(result, whole_reply(result))

    # -- errors --------------------------------------------------------------------------------

    def error_status(self, err: ProxyError) -> int:
        return STATUS[err.kind]

    @abstractmethod
    def error_body(self, err: ProxyError) -> dict[str, Any]:
        """`err` in this protocol's error shape."""

    @abstractmethod
    def stream_error(self, err: ProxyError) -> bytes:
        """`err` as an in-stream SSE event (after a keepalive stream already sent its 200)."""

    @abstractmethod
    def too_long(self, prompt_tokens: int, max_model_len: int) -> ProxyError:
        """The protocol's own "prompt too long" wording (harnesses match on it to compact history)."""


class StreamEncoder(ABC):
    """The SSE events of one streamed answer, written as the reply grows (proxy/stream_text.py):
    `open()` once, `delta(channel, text)` per piece of reasoning or content sent early, then
    `close(result, rest)` once: the pieces not sent yet, the tool calls, the finish and the usage.
    Built once per answer; it keeps the protocol's stream state (open block, sequence numbers)."""

    def __init__(self, head: CallResult, req: ChatRequest):
        self.head, self.req = head, req

    @abstractmethod
    def open(self) -> list[bytes]:
        """The events that start the answer."""

    @abstractmethod
    def delta(self, channel: Channel, text: str) -> list[bytes]:
        """One piece of the reply's reasoning (sent whole, once) or of its content."""

    @abstractmethod
    def close(self, result: CallResult, rest: list[Delta]) -> list[bytes]:
        """The events that end the answer: `rest` (what was not sent of the reasoning and the
        content), then the tool calls, finish reason and usage of `result`."""


def whole_reply(result: CallResult) -> list[Delta]:
    """A finished reply's reasoning and content as the deltas of an answer that sent nothing early."""
    c = result.completion
    out: list[Delta] = [("reasoning", c.reasoning)] if c.reasoning else []
    return out + [("text", c.content)] if c.content else out


class OpenAIWire(WireProtocol):
    """The error shape both OpenAI APIs share: `{"error": {"message", "type", "param", "code"}}`."""

    keepalive = b": keepalive\n\n"
    _TYPE: ClassVar[dict[str, str]] = {"overloaded": "server_error", "internal": "server_error",
                                       "rate_limited": "rate_limit_error", "quota": "insufficient_quota"}
    _CODE: ClassVar[dict[str, str]] = {
        "too_long": "context_length_exceeded", "auth": "invalid_api_key", "forbidden": "forbidden",
        "not_found": "not_found", "method_not_allowed": "method_not_allowed", "timeout": "request_timeout",
        "too_large": "request_too_large", "quota": "store_quota_exceeded", "call_budget": "call_budget_exceeded",
        "rate_limited": "rate_limit_exceeded", "headers_too_large": "request_header_fields_too_large",
        "overloaded": "overloaded"}

    def error_body(self, err: ProxyError) -> dict[str, Any]:
        return {"error": {"message": err.message, "type": self._TYPE.get(err.kind, "invalid_request_error"),
                          "param": err.param, "code": self._CODE.get(err.kind)}}

    def stream_error(self, err: ProxyError) -> bytes:
        error = self.error_body(err)["error"]  # the SDKs raise on a chunk with an "error" key
        return b"event: error\ndata: " + dumps({**error, "type": "error", "error": error}) + b"\n\n"

    def too_long(self, prompt_tokens: int, max_model_len: int) -> ProxyError:
        return ProxyError("too_long", f"This model's maximum context length is {max_model_len} tokens. However, "
                                      f"your messages resulted in {prompt_tokens} tokens. Please reduce the length "
                                      "of the messages.", "messages")


# -- parsing helpers shared by the protocols ------------------------------------------------------------


class Dropped:
    """What a request held that the policy cannot see; stored in the call's `meta["dropped"]`."""

    def __init__(self) -> None:
        self.items: list[dict[str, str]] = []

    def placeholder(self, where: str, kind: str) -> str:
        self.items.append({"field": where, "type": kind, "replaced_by": f"[{kind}]"})
        return f"[{kind}]"

    def skip(self, where: str, kind: str) -> None:
        self.items.append({"field": where, "type": kind, "replaced_by": ""})


def object_schema(schema: Any, where: str) -> dict[str, Any]:
    """A tool's JSON schema: absent -> {}; else a JSON object whose `type`, when given, is "object"."""
    if schema is None:
        return {}
    if not isinstance(schema, dict):
        raise bad_request(f"invalid request: {where} must be a JSON schema object, got {type(schema).__name__}", where)
    if "type" in schema and schema["type"] != "object":
        raise bad_request(f"invalid request: {where}.type must be \"object\" (tool arguments are an object)", where)
    return schema


def type_of(obj: Any, where: str, default: str | None = None) -> str | None:
    """The `type` of a content block, input item or tool: a string, or `default` when absent
    (None for a non-object); any other value is a 400 naming the field."""
    kind = obj.get("type", default) if isinstance(obj, dict) else None
    if kind is not None and not isinstance(kind, str):
        raise unknown_block(where, kind)
    return kind


def unknown_block(where: str, kind: Any) -> ProxyError:
    return bad_request(f"invalid request: {where}.type: unsupported content type {str(kind)[:80]!r}",
                       f"{where}.type")
