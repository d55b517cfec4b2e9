"""The Starlette app: routes of the three protocols under `/r/{key}/v1/...` (a registered rollout)
and `/v1/...` (the ad-hoc rollout), models list, health, admin routes, protocol-shaped errors.

A streamed call still running after `keepalive_s` opens its stream at once and keeps it alive
(Anthropic `ping` events, SSE comments for OpenAI) until its events are ready; an error after
that point travels as an in-stream error event, since the status line is already sent."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from harnessrl.proxy import anthropic
from harnessrl.proxy.admin import admin_routes
from harnessrl.proxy.calls import CallHandler, Reply
from harnessrl.proxy.errors import ProxyError, internal, not_found, unauthorized
from harnessrl.proxy.httputil import error_response, family_of, json_response, read_body
from harnessrl.proxy.jsonutil import DecodeError, dumps, loads
from harnessrl.proxy.protocols import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES, Protocol
from harnessrl.proxy.rollouts import RolloutRegistry, RolloutState

_KEEPALIVE = {"anthropic": b'event: ping\ndata: {"type":"ping"}\n\n', "openai": b": keepalive\n\n"}


@dataclass
class AppConfig:
    served_model: str
    admin_token: str | None
    max_body_bytes: int
    base_urls: Callable[[str | None], dict[str, str]]
    keepalive_s: float = 5.0  # a streamed call still running after this starts its stream with keepalives


def _reply(reply: Reply) -> Response:
    return Response(reply.body, status_code=reply.status, media_type=reply.media_type)


def _wants_stream(body: bytes) -> bool:
    try:
        payload = loads(body)
    except DecodeError:
        return False
    return isinstance(payload, dict) and payload.get("stream") is True


async def _keepalive_stream(task: "asyncio.Future[Reply]", family: str, every_s: float) -> AsyncIterator[bytes]:
    """Keepalives until the call finishes, then its SSE events, or its error as an in-stream event:
    Anthropic `event: error` + its error body, OpenAI `{"error": ...}` (which the SDKs raise)."""
    while not task.done():
        yield _KEEPALIVE[family]
        await asyncio.wait({task}, timeout=every_s)
    reply = task.result()
    if reply.status == 200:
        yield reply.body
        return
    error = loads(reply.body)
    if family == "openai":
        error = {**error["error"], "type": "error", "error": error["error"]}
    yield b"event: error\ndata: " + dumps(error) + b"\n\n"


def _model_entry(name: str) -> dict[str, Any]:
    """One model in both the OpenAI and the Anthropic list shapes."""
    return {"id": name, "object": "model", "created": 0, "owned_by": "harnessrl", "type": "model",
            "display_name": name, "created_at": "1970-01-01T00:00:00Z"}


class _Endpoints:
    """The protocol endpoints over one handler and rollout registry."""

    def __init__(self, handler: CallHandler, registry: RolloutRegistry, cfg: AppConfig):
        self.handler, self.registry, self.cfg = handler, registry, cfg

    def rollout_of(self, request: Request) -> RolloutState:
        key = request.path_params.get("key")
        if key is None:
            return self.registry.adhoc()
        state = self.registry.get(key)
        if state is None:
            raise unauthorized()
        return state

    def call(self, protocol: Protocol) -> Callable:
        async def endpoint(request: Request) -> Response:
            try:
                rollout = self.rollout_of(request)
            except ProxyError as e:  # no rollout: nothing to record
                return error_response(e, protocol.family)  # type: ignore[arg-type]
            try:
                body = await read_body(request, self.cfg.max_body_bytes)
            except ProxyError as e:
                return _reply(await self.handler.reject(protocol, rollout, request.url.path, e))
            task = asyncio.ensure_future(self.handler.handle(protocol, rollout, body, request.url.path))
            done, _ = await asyncio.wait({task}, timeout=self.cfg.keepalive_s)
            if not done and _wants_stream(body):
                return StreamingResponse(_keepalive_stream(task, protocol.family, self.cfg.keepalive_s),
                                         media_type="text/event-stream")
            return _reply(await task)

        return endpoint

    async def count_tokens(self, request: Request) -> Response:
        try:
            rollout = self.rollout_of(request)
            body = await read_body(request, self.cfg.max_body_bytes)
            n = self.handler.count_tokens(ANTHROPIC, rollout, body)
        except ProxyError as e:
            return error_response(e, "anthropic")
        return json_response(200, anthropic.count_tokens_body(n))

    async def models(self, request: Request) -> Response:
        try:
            self.rollout_of(request)
        except ProxyError as e:
            return error_response(e, family_of(request))
        entry = _model_entry(self.cfg.served_model)
        return json_response(200, {"object": "list", "data": [entry], "has_more": False,
                                   "first_id": entry["id"], "last_id": entry["id"]})

    async def model(self, request: Request) -> Response:
        try:
            self.rollout_of(request)
        except ProxyError as e:
            return error_response(e, family_of(request))
        return json_response(200, _model_entry(request.path_params["model"]))  # every name aliases the policy

    async def health(self, request: Request) -> Response:
        return json_response(200, {"ok": True, "model": self.cfg.served_model,
                                   "policy_version": self.handler.engine.policy_version, "time": time.time()})

    def routes(self) -> list[Route]:
        routes = [Route("/health", self.health, methods=["GET"])]
        for prefix in ("", "/r/{key}"):
            routes += [
                Route(f"{prefix}/v1/chat/completions", self.call(OPENAI_CHAT), methods=["POST"]),
                Route(f"{prefix}/v1/messages", self.call(ANTHROPIC), methods=["POST"]),
                Route(f"{prefix}/v1/messages/count_tokens", self.count_tokens, methods=["POST"]),
                Route(f"{prefix}/v1/responses", self.call(OPENAI_RESPONSES), methods=["POST"]),
                Route(f"{prefix}/v1/models", self.models, methods=["GET"]),
                Route(f"{prefix}/v1/models/{{model:path}}", self.model, methods=["GET"]),
            ]
        return routes


async def _http_error(request: Request, exc: Exception) -> Response:
    """Unknown route / method -> 404, anything unexpected -> 500, in the caller's protocol shape."""
    if getattr(exc, "status_code", 500) in (404, 405):
        return error_response(not_found(request.method, request.url.path), family_of(request))
    return error_response(internal(str(getattr(exc, "detail", exc))), family_of(request))


def build_app(handler: CallHandler, registry: RolloutRegistry, cfg: AppConfig) -> Starlette:
    routes = _Endpoints(handler, registry, cfg).routes()
    routes += admin_routes(registry, cfg.admin_token, cfg.max_body_bytes, cfg.base_urls)
    return Starlette(routes=routes, exception_handlers={HTTPException: _http_error, Exception: _http_error})
