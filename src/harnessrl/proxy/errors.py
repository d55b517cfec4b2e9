"""Proxy errors and their wire shapes.

A `ProxyError` carries a protocol-neutral kind; each protocol renders it in its own shape:
Anthropic `{"type": "error", "error": {"type", "message"}}`, OpenAI (Chat and Responses)
`{"error": {"message", "type", "param", "code"}}`. Overload is 529 for Anthropic (Claude Code
retries it) and 503 for OpenAI clients.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ValidationError

Kind = Literal["invalid_request", "too_long", "auth", "not_found", "too_large", "overloaded", "internal"]
Family = Literal["anthropic", "openai"]

_STATUS = {"invalid_request": 400, "too_long": 400, "auth": 401, "not_found": 404, "too_large": 413,
           "overloaded": 503, "internal": 500}
_ANTHROPIC_TYPE = {"invalid_request": "invalid_request_error", "too_long": "invalid_request_error",
                   "auth": "authentication_error", "not_found": "not_found_error",
                   "too_large": "request_too_large", "overloaded": "overloaded_error", "internal": "api_error"}
_OPENAI_TYPE = {"invalid_request": "invalid_request_error", "too_long": "invalid_request_error",
                "auth": "invalid_request_error", "not_found": "invalid_request_error",
                "too_large": "invalid_request_error", "overloaded": "server_error", "internal": "server_error"}
_OPENAI_CODE = {"too_long": "context_length_exceeded", "auth": "invalid_api_key", "not_found": "not_found",
                "too_large": "request_too_large", "overloaded": "overloaded"}


class ProxyError(Exception):
    """A request the proxy answers with an error (never a crash)."""

    def __init__(self, kind: Kind, message: str, param: str | None = None):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.param = param

    def status(self, family: Family) -> int:
        if self.kind == "overloaded" and family == "anthropic":
            return 529
        return _STATUS[self.kind]

    def body(self, family: Family) -> dict[str, Any]:
        if family == "anthropic":
            return {"type": "error", "error": {"type": _ANTHROPIC_TYPE[self.kind], "message": self.message}}
        return {"error": {"message": self.message, "type": _OPENAI_TYPE[self.kind], "param": self.param,
                          "code": _OPENAI_CODE.get(self.kind)}}


def bad_request(message: str, param: str | None = None) -> ProxyError:
    return ProxyError("invalid_request", message, param)


def too_long(family: Family, prompt_tokens: int, max_model_len: int) -> ProxyError:
    """The protocol's own "prompt too long" wording (harnesses match on it to compact history)."""
    if family == "anthropic":
        msg = f"prompt is too long: {prompt_tokens} tokens > {max_model_len} maximum"
    else:
        msg = (f"This model's maximum context length is {max_model_len} tokens. However, your messages "
               f"resulted in {prompt_tokens} tokens. Please reduce the length of the messages.")
    return ProxyError("too_long", msg, "messages")


def unauthorized() -> ProxyError:
    return ProxyError("auth", "invalid rollout key: this proxy does not serve that key (closed or never registered)")


def not_found(method: str, path: str) -> ProxyError:
    return ProxyError("not_found", f"no such route: {method} {path}")


def too_large(limit: int) -> ProxyError:
    return ProxyError("too_large", f"request body exceeds the proxy limit of {limit} bytes")


def overloaded() -> ProxyError:
    return ProxyError("overloaded", "the engine is overloaded, retry shortly")


def internal(message: str) -> ProxyError:
    return ProxyError("internal", message)


def validation_message(err: ValidationError) -> str:
    """The first schema error of a request body, as one line."""
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first.get("loc", ()))
    return f"invalid request: {loc}: {first.get('msg', 'bad value')}"
