"""The Starlette app: the routes of each wire protocol under `/r/{key}/v1/...` (a registered
rollout) and `/v1/...` (the ad-hoc rollout), models, health, the admin routes, and one exception
handler that answers every `ProxyError` in the caller's protocol shape.

Limits, the same on every route that reads a body (docs/proxy.md): the body counts as the bytes
received after HTTP framing (chunked encoding removed, no content decoding); a declared
Content-Length over `max_body_bytes` is refused before reading, and reading stops at the limit
(413). A body not complete within `body_timeout_s` gets a 408. A rollout key with
`max_inflight_per_key` calls in flight gets a 429 (Retry-After), the whole proxy with
`max_inflight` calls in flight a 529/503 (Retry-After); neither is recorded.

A streamed call still running after `keepalive_s` opens its stream at once and keeps it alive
(the protocol's keepalive bytes) until its events are ready; an error after that point travels
as the protocol's in-stream error event, since the status line is already sent."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Mount, Route

from harnessrl.proxy.admin import AdminAuth, admin_routes
from harnessrl.proxy.calls import CallHandler, Reply
from harnessrl.proxy.errors import (ProxyError, internal, method_not_allowed, not_found, overloaded, rate_limited,
                                    unauthorized, unknown_model)
from harnessrl.proxy.httputil import ClientGone, error_response, json_response, read_body
from harnessrl.proxy.jsonutil import DecodeError, loads
from harnessrl.proxy.protocols import ANTHROPIC, WIRE_PROTOCOLS, protocol_for
from harnessrl.proxy.rollouts import RolloutRegistry, RolloutState
from harnessrl.proxy.wire import WireProtocol


@dataclass
class AppConfig:
    served_model: str
    admin_token: str | None
    max_body_bytes: int
    base_urls: Callable[[str | None], dict[str, str]]
    keepalive_s: float = 5.0  # a streamed call still running after this starts its stream with keepalives
    body_timeout_s: float = 30.0  # a request body must be complete within this
    max_inflight_per_key: int = 32  # concurrent calls of one rollout key (more: 429)
    max_inflight: int = 8192  # concurrent calls of the whole proxy (more: 529 / 503)
    connection_stats: Callable[[], dict[str, int]] | None = None  # the transport guard's counters (/health)


def _reply(reply: Reply) -> Response:
    return Response(reply.body, status_code=reply.status, media_type=reply.media_type, headers=reply.headers)


def _wants_stream(body: bytes) -> bool:
    try:
        payload = loads(body)
    except DecodeError:
        return False
    return isinstance(payload, dict) and payload.get("stream") is True


async def _keepalive_stream(task: "asyncio.Future[Reply]", wire: WireProtocol, every_s: float) -> AsyncIterator[bytes]:
    """Keepalives until the call finishes, then its SSE events, or its error as an in-stream event."""
    while not task.done():
        yield wire.keepalive
        await asyncio.wait({task}, timeout=every_s)
    reply = task.result()
    if reply.error is None:
        yield reply.body
    else:
        yield wire.stream_error(reply.error)


def _model_entry(name: str) -> dict[str, Any]:
    """One model in both the OpenAI and the Anthropic list shapes."""
    return {"id": name, "object": "model", "created": 0, "owned_by": "harnessrl", "type": "model",
            "display_name": name, "created_at": "1970-01-01T00:00:00Z"}


class _Endpoints:
    """The protocol endpoints over one handler and rollout registry."""

    def __init__(self, handler: CallHandler, registry: RolloutRegistry, cfg: AppConfig):
        self.handler, self.registry, self.cfg = handler, registry, cfg
        self.inflight = 0
        self._openapi: dict[str, Any] | None = None

    def rollout_of(self, request: Request) -> RolloutState:
        key = request.path_params.get("key")
        if key is None:
            return self.registry.adhoc()
        state = self.registry.get(key)
        if state is None:
            raise unauthorized()
        return state

    def _admit(self, rollout: RolloutState) -> Callable[[], None]:
        """Count a call in (or refuse it: 429 per key, 529/503 for the proxy); returns its release."""
        if rollout.inflight >= self.cfg.max_inflight_per_key:
            raise rate_limited(f"this rollout key already has {rollout.inflight} calls in flight "
                               f"(limit {self.cfg.max_inflight_per_key})")
        if self.inflight >= self.cfg.max_inflight:
            raise overloaded()
        rollout.inflight += 1
        self.inflight += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                rollout.inflight -= 1
                self.inflight -= 1

        return release

    def call(self, wire: WireProtocol) -> Callable:
        async def endpoint(request: Request) -> Response:
            request.state.wire = wire
            rollout = self.rollout_of(request)
            release = self._admit(rollout)
            try:
                body = await read_body(request, self.cfg.max_body_bytes, self.cfg.body_timeout_s)
            except ProxyError as e:  # too large / too slow: recorded, then answered
                release()
                return _reply(await self.handler.reject(wire, rollout, request.url.path, e))
            except BaseException:
                release()
                raise
            task = asyncio.ensure_future(self.handler.handle(wire, rollout, body, request.url.path))
            task.add_done_callback(lambda _: release())
            done, _ = await asyncio.wait({task}, timeout=self.cfg.keepalive_s)
            if not done and _wants_stream(body):
                return StreamingResponse(_keepalive_stream(task, wire, self.cfg.keepalive_s),
                                         media_type="text/event-stream")
            return _reply(await task)

        return endpoint

    async def count_tokens(self, request: Request) -> Response:
        request.state.wire = ANTHROPIC
        rollout = self.rollout_of(request)
        body = await read_body(request, self.cfg.max_body_bytes, self.cfg.body_timeout_s)
        n = self.handler.count_tokens(ANTHROPIC, rollout, body)
        return json_response(200, ANTHROPIC.count_tokens_body(n))

    async def models(self, request: Request) -> Response:
        self.rollout_of(request)
        entry = _model_entry(self.cfg.served_model)
        return json_response(200, {"object": "list", "data": [entry], "has_more": False,
                                   "first_id": entry["id"], "last_id": entry["id"]})

    async def model(self, request: Request) -> Response:
        self.rollout_of(request)
        name = request.path_params["model"]
        if name != self.cfg.served_model:
            raise unknown_model(name, self.cfg.served_model)
        return json_response(200, _model_entry(name))

    async def openapi(self, request: Request) -> Response:
        from harnessrl.proxy.openapi import openapi_schema  # noqa: PLC0415 (built on first request)

        if self._openapi is None:
            self._openapi = openapi_schema(self.cfg.served_model)
        return json_response(200, self._openapi)

    async def health(self, request: Request) -> Response:
        return json_response(200, {"ok": True, "model": self.cfg.served_model,
                                   "policy_version": self.handler.engine.policy_version, "time": time.time(),
                                   "open_keys": len(self.registry), "inflight": self.inflight,
                                   "connections": self.cfg.connection_stats() if self.cfg.connection_stats else {}})

    def routes(self) -> list[Route]:
        routes = [Route("/health", self.health, methods=["GET"]), Route("/openapi.json", self.openapi, methods=["GET"])]
        for prefix in ("", "/r/{key}"):
            for wire in WIRE_PROTOCOLS:
                routes += [Route(prefix + path, self.call(wire), methods=["POST"]) for path in wire.routes]
            routes += [
                Route(prefix + ANTHROPIC.count_tokens_route, self.count_tokens, methods=["POST"]),
                Route(f"{prefix}/v1/models", self.models, methods=["GET"]),
                Route(f"{prefix}/v1/models/{{model:path}}", self.model, methods=["GET"]),
            ]
        return routes


def _wire_of(request: Request) -> WireProtocol:
    return getattr(request.state, "wire", None) or protocol_for(request.url.path, request.headers)


async def _on_proxy_error(request: Request, exc: Exception) -> Response:
    """The one handler for the proxy's typed errors: the caller's protocol shape, status and headers."""
    assert isinstance(exc, ProxyError)
    return error_response(_wire_of(request), exc)


async def _on_http_error(request: Request, exc: Exception) -> Response:
    """Routing errors from Starlette: unknown route 404, wrong method 405."""
    status = getattr(exc, "status_code", 500)
    if status == 405:
        allow = tuple(m.strip() for m in (getattr(exc, "headers", None) or {}).get("Allow", "").split(",") if m.strip())
        err = method_not_allowed(request.method, request.url.path, allow)
    elif status == 404:
        err = not_found(request.method, request.url.path)
    else:
        err = internal(str(getattr(exc, "detail", exc)))
    return error_response(_wire_of(request), err)


async def _on_crash(request: Request, exc: Exception) -> Response:
    if isinstance(exc, (ClientGone, ClientDisconnect)):  # nobody is listening any more
        return Response(status_code=499)
    return error_response(_wire_of(request), internal(f"proxy error: {type(exc).__name__}: {exc}"))


def build_app(handler: CallHandler, registry: RolloutRegistry, cfg: AppConfig) -> Starlette:
    routes: list[Any] = _Endpoints(handler, registry, cfg).routes()
    routes.append(Mount("/admin", routes=admin_routes(registry, cfg.max_body_bytes, cfg.body_timeout_s, cfg.base_urls),
                        middleware=[Middleware(AdminAuth, token=cfg.admin_token)]))
    return Starlette(routes=routes, exception_handlers={ProxyError: _on_proxy_error, HTTPException: _on_http_error,
                                                        ClientGone: _on_crash, ClientDisconnect: _on_crash,
                                                        Exception: _on_crash})
