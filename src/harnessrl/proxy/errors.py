"""Proxy errors: a protocol-neutral kind, a message and the request field at fault.

Each wire protocol (wire.py) renders a `ProxyError` in its own error shape and status; this
module only knows the neutral kinds and the HTTP status each one means:

    invalid_request 400 | too_long 400 | auth 401 | forbidden 403 | not_found 404 |
    method_not_allowed 405 | timeout 408 | too_large 413 | quota 413 | call_budget 400 | rate_limited 429 |
    headers_too_large 431 | overloaded 503 (529 for Anthropic clients, which Claude Code retries) | internal 500

`rate_limited` and `overloaded` carry a `retry_after` (seconds) sent as the Retry-After header.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ValidationError

from harnessrl.errors import HarnessRLError

Kind = Literal["invalid_request", "too_long", "auth", "forbidden", "not_found", "method_not_allowed", "timeout",
               "too_large", "quota", "call_budget", "rate_limited", "headers_too_large", "overloaded", "internal"]

STATUS: dict[str, int] = {
    "invalid_request": 400, "too_long": 400, "auth": 401, "forbidden": 403, "not_found": 404,
    "method_not_allowed": 405, "timeout": 408, "too_large": 413, "quota": 413, "call_budget": 400, "rate_limited": 429,
    "headers_too_large": 431, "overloaded": 503, "internal": 500,
}


class ProxyError(HarnessRLError):
    """A request the proxy answers with an error (never a crash)."""

    def __init__(self, kind: Kind, message: str, param: str | None = None, *, retry_after: float | None = None,
                 allow: tuple[str, ...] = ()):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.param = param
        self.retry_after = retry_after
        self.allow = allow  # methods a 405 route accepts

    def headers(self) -> dict[str, str]:
        out = {}
        if self.retry_after is not None:
            out["retry-after"] = str(max(1, round(self.retry_after)))
        if self.allow:
            out["allow"] = ", ".join(self.allow)
        if self.kind in ("timeout", "too_large", "headers_too_large"):  # the connection ends after the answer
            out["connection"] = "close"
        return out


def bad_request(message: str, param: str | None = None) -> ProxyError:
    return ProxyError("invalid_request", message, param)


def unauthorized() -> ProxyError:
    return ProxyError("auth", "invalid rollout key: this proxy does not serve that key (closed or never registered)")


def admin_unauthorized(sent: bool, well_formed: bool = True) -> ProxyError:
    if not sent:
        return ProxyError("auth", "admin routes need the header `Authorization: Bearer <admin token>` "
                                  "(printed by `harnessrl serve`)")
    if not well_formed:
        return ProxyError("auth", "malformed Authorization header: send exactly "
                                  "`Authorization: Bearer <admin token>`")
    return ProxyError("auth", "wrong admin token: send the admin token this proxy printed at start")


def admin_disabled() -> ProxyError:
    return ProxyError("forbidden", "admin routes are disabled on this proxy (it was started without an admin token)")


def not_found(method: str, path: str) -> ProxyError:
    return ProxyError("not_found", f"no such route: {method} {path}")


def unknown_model(name: str, served: str) -> ProxyError:
    return ProxyError("not_found", f"unknown model {name[:200]!r}: this proxy serves {served!r}", "model")


def method_not_allowed(method: str, path: str, allow: tuple[str, ...]) -> ProxyError:
    return ProxyError("method_not_allowed", f"{method} is not allowed on {path}: use {', '.join(allow)}",
                      allow=allow)


def too_large(limit: int) -> ProxyError:
    return ProxyError("too_large", f"request body exceeds the proxy limit of {limit} bytes (see docs/proxy.md)")


def body_timeout(seconds: float) -> ProxyError:
    return ProxyError("timeout", f"the request body did not arrive within {seconds:g} s")


def quota_spent(rollout_id: str, quota: int) -> ProxyError:
    return ProxyError("quota", f"rollout {rollout_id!r} has spent its store quota of {quota} bytes; "
                               "no further calls are recorded for it")


def call_budget_spent(rollout_id: str, max_calls: int) -> ProxyError:
    return ProxyError("call_budget", f"rollout {rollout_id!r} has made its {max_calls} model calls (the run's "
                                     "loop.max_turns for a harness without a turn limit of its own); no further calls")


def rate_limited(message: str, retry_after: float = 1.0) -> ProxyError:
    return ProxyError("rate_limited", message, retry_after=retry_after)


def overloaded(retry_after: float = 1.0) -> ProxyError:
    return ProxyError("overloaded", "the engine is overloaded, retry shortly", retry_after=retry_after)


def internal(message: str) -> ProxyError:
    return ProxyError("internal", message)


def validation_message(err: ValidationError) -> tuple[str, str | None]:
    """The first schema error of a request body as one line, and the field it names."""
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first.get("loc", ()))
    return f"invalid request: {loc}: {first.get('msg', 'bad value')}", loc or None
