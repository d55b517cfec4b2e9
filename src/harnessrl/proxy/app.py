"""The Starlette app: the routes of each wire protocol under `/r/{key}/v1/...` (a registered
rollout) and `/v1/...` (the ad-hoc rollout; Gemini's `/v1beta/...` likewise), models, health, the admin routes, and one exception
handler that answers every `ProxyError` in the caller's protocol shape.

Limits, the same on every route that reads a body (docs/proxy.md): the body counts as the bytes
received after HTTP framing (chunked encoding removed, no content decoding); a declared
Content-Length over `max_body_bytes` is refused before reading, and reading stops at the limit
(413; a body over the limit is read to its end, up to `drain_bytes`, before the 413 goes out). A
body not complete within `body_timeout_s` gets a 408. A rollout key with `max_inflight_per_key`
calls in flight gets a 429 (Retry-After), the whole proxy with `max_inflight` calls in flight a
529/503 (Retry-After); neither is recorded. A large body (over `large_body_bytes`) also needs one
of `max_large_inflight_per_key` large slots of its key (else 429) and one of the proxy's
`max_large_inflight` (else 529/503): the CPU and memory one rollout's big requests can hold are
bounded. These refusals are stored (count_tokens stores nothing).

After a stored call's answer went out to its last byte, on a connection still open, the call is
marked delivered (`CallRecord.delivered`); a crash in between leaves it unmarked. A streamed answer
(calls.py) sends its events as the engine samples them, with keepalives while none comes; its
call holds its in-flight slots until it is stored.

A streamed call still running after `keepalive_s` opens its stream at once and keeps it alive
(the protocol's keepalive bytes) until its events are ready; an error after that point travels
as the protocol's in-stream error event, since the status line is already sent."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable

from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route

from harnessrl.proxy.admin import AdminAuth, admin_routes
from harnessrl.proxy.calls import CallHandler, Reply
from harnessrl.proxy.errors import (ProxyError, internal, method_not_allowed, not_found, overloaded, rate_limited,
                                    unauthorized, unknown_model)
from harnessrl.proxy.httputil import DRAIN_LIMIT_BYTES, ClientGone, error_response, json_response, read_body
from harnessrl.proxy.jsonutil import loads_bounded
from harnessrl.proxy.protocols import WIRE_PROTOCOLS, protocol_for
from harnessrl.proxy.replay import load_script
from harnessrl.proxy.rollouts import RolloutRegistry, RolloutState
from harnessrl.proxy.transport import CONNECTION_OPEN
from harnessrl.proxy.wire import WireProtocol

_OFFLOAD_BYTES = 16384  # bodies above this are JSON-parsed off the event loop


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
    large_body_bytes: int = 1024 * 1024  # a body over this is "large": it needs a large slot
    max_large_inflight_per_key: int = 2  # concurrent large requests of one rollout key (more: 429)
    max_large_inflight: int = 4  # concurrent large requests of the whole proxy (more: 529 / 503)
    drain_bytes: int = DRAIN_LIMIT_BYTES  # a body over max_body_bytes is read and dropped up to this
    info: Callable[[], dict[str, Any]] = dict  # GET /admin/info: where the proxy records, how it serves


def _wants_stream(body: bytes) -> bool:
    try:
        payload = loads_bounded(body)
    except ValueError:  # malformed or too deep (DecodeError and TooDeep are ValueErrors)
        return False
    return isinstance(payload, dict) and payload.get("stream") is True


async def _keepalive_stream(task: "asyncio.Future[Reply]", wire: WireProtocol, every_s: float) -> AsyncIterator[bytes]:
    """Keepalives until the call answers, then its SSE events, or its error as an in-stream event."""
    while not task.done():
        yield wire.keepalive
        await asyncio.wait({task}, timeout=every_s)
    reply = task.result()
    if reply.stream is not None:
        async for chunk in reply.stream.events(wire.keepalive, every_s):
            yield chunk
    elif reply.error is None:
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
        self.large_inflight = 0
        self._openapi: dict[str, Any] | None = None

    def rollout_of(self, request: Request, wire: WireProtocol | None = None) -> RolloutState:
        key = request.path_params.get("key")
        if key is None:
            sent = wire.api_key(request.headers, request.query_params) if wire is not None else None
            state = self.registry.get(sent) if sent else None  # a registered key sent outside the path
            return state if state is not None else self.registry.adhoc()
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

    def _admit_large(self, rollout: RolloutState, size: int) -> Callable[[], None]:
        """A large slot for a body of `size` bytes (or the refusal: 429 per key, 529/503 for the
        proxy); returns its release (a no-op for a body that is not large)."""
        if size <= self.cfg.large_body_bytes:
            return lambda: None
        if rollout.large_inflight >= self.cfg.max_large_inflight_per_key:
            raise rate_limited(f"this rollout key already has {rollout.large_inflight} large requests in flight "
                               f"(over {self.cfg.large_body_bytes} bytes; limit {self.cfg.max_large_inflight_per_key})")
        if self.large_inflight >= self.cfg.max_large_inflight:
            raise overloaded()
        rollout.large_inflight += 1
        self.large_inflight += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                rollout.large_inflight -= 1
                self.large_inflight -= 1

        return release

    async def _read(self, request: Request) -> bytes:
        return await read_body(request, self.cfg.max_body_bytes, self.cfg.body_timeout_s, self.cfg.drain_bytes)

    def _reply(self, request: Request, reply: Reply, wire: WireProtocol | None = None) -> Response:
        if reply.stream is not None and wire is not None:  # events as the engine samples them
            return StreamingResponse(reply.stream.events(wire.keepalive, self.cfg.keepalive_s),
                                     media_type=reply.media_type, background=self._delivery(request, reply))
        return Response(reply.body, status_code=reply.status, media_type=reply.media_type, headers=reply.headers,
                        background=self._delivery(request, reply))

    def _delivery(self, request: Request, reply: Reply) -> BackgroundTask | None:
        """Runs once the response's last byte was handed to the connection: marks the call delivered
        unless the connection was lost meanwhile (the transport tells, transport.py)."""
        if reply.call_id is None:
            return None
        is_open = request.scope.get("extensions", {}).get(CONNECTION_OPEN)
        writer, call_id, stream = self.handler.writer, reply.call_id, reply.stream

        async def mark() -> None:  # a coroutine: run here, not in a thread pool
            if (is_open is None or is_open()) and (stream is None or stream.sent_all):
                writer.delivered(call_id)

        return BackgroundTask(mark)

    def call(self, wire: WireProtocol) -> Callable:
        async def endpoint(request: Request) -> Response:
            request.state.wire = wire
            bound = request.state.wire = wire.for_request(request.url.path, request.path_params, request.query_params)
            rollout = self.rollout_of(request, bound)
            release = self._admit(rollout)
            try:
                body = await self._read(request)
                release_large = self._admit_large(rollout, len(body))
            except ProxyError as e:  # too large / too slow / too many large ones: recorded, then answered
                release()
                size = None if e.kind in ("too_large", "timeout") else len(body)
                return self._reply(request, await self.handler.reject(bound, rollout, request.url.path, e, size))
            except BaseException:
                release()
                raise

            def done_with(task: "asyncio.Future[Reply]") -> None:
                stream = None if task.cancelled() or task.exception() else task.result().stream
                if stream is not None and stream.done is not None:  # a streamed answer: when it ends
                    stream.done.add_done_callback(lambda _: (release_large(), release()))
                else:
                    release_large()
                    release()

            task = asyncio.ensure_future(self.handler.handle(bound, rollout, body, request.url.path))
            task.add_done_callback(done_with)
            done, _ = await asyncio.wait({task}, timeout=self.cfg.keepalive_s)
            if not done and (bound.streams or await self._wants_stream(body)):
                stream = _keepalive_stream(task, bound, self.cfg.keepalive_s)
                return StreamingResponse(stream, media_type="text/event-stream",
                                         background=BackgroundTask(self._mark_when_done, request, task))
            return self._reply(request, await task, bound)

        return endpoint

    async def _wants_stream(self, body: bytes) -> bool:
        return await asyncio.to_thread(_wants_stream, body) if len(body) > _OFFLOAD_BYTES else _wants_stream(body)

    async def _mark_when_done(self, request: Request, task: "asyncio.Future[Reply]") -> None:
        if task.done() and not task.cancelled() and task.exception() is None:
            background = self._delivery(request, task.result())
            if background is not None:
                await background()

    def count_tokens(self, wire: WireProtocol) -> Callable:
        async def endpoint(request: Request) -> Response:
            request.state.wire = wire
            bound = request.state.wire = wire.for_request(request.url.path, request.path_params,
                                                          request.query_params)
            rollout = self.rollout_of(request, bound)
            release = self._admit(rollout)
            try:
                body = await self._read(request)
                release_large = self._admit_large(rollout, len(body))
                try:
                    n = await self.handler.count_tokens(bound, rollout, body)
                finally:
                    release_large()
            finally:
                release()
            return json_response(200, bound.count_tokens_body(n))

        return endpoint

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
                if wire.count_tokens_route:
                    routes.append(Route(prefix + wire.count_tokens_route, self.count_tokens(wire), methods=["POST"]))
            routes += [
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
    routes: list[BaseRoute] = list(_Endpoints(handler, registry, cfg).routes())
    routes.append(Mount("/admin", routes=admin_routes(registry, cfg.max_body_bytes, cfg.body_timeout_s, cfg.base_urls,
                                                      cfg.drain_bytes, handler.writer.flush,
                                                      lambda parent, n: load_script(handler.writer.store, parent, n),
                                                      cfg.info),
                        middleware=[Middleware(AdminAuth, token=cfg.admin_token)]))
    return Starlette(routes=routes, exception_handlers={ProxyError: _on_proxy_error, HTTPException: _on_http_error,
                                                        ClientGone: _on_crash, ClientDisconnect: _on_crash,
                                                        Exception: _on_crash})
