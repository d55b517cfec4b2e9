"""The Starlette app: routes of the three protocols under `/r/{key}/v1/...` (a registered rollout)
and `/v1/...` (the ad-hoc rollout), models list, health, admin endpoints, protocol-shaped errors."""

from __future__ import annotations

import asyncio
import hmac
import time
from dataclasses import dataclass
from typing import Any, Callable

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from harnessrl.proxy import anthropic
from harnessrl.proxy.calls import CallHandler, Reply
from harnessrl.proxy.errors import Family, ProxyError, bad_request, internal, not_found, too_large, unauthorized
from harnessrl.proxy.jsonutil import DecodeError, dumps, loads
from harnessrl.proxy.protocols import ANTHROPIC, OPENAI_CHAT, OPENAI_RESPONSES, Protocol
from harnessrl.proxy.rollouts import RolloutRegistry, RolloutState


@dataclass
class AppConfig:
    served_model: str
    admin_token: str | None
    max_body_bytes: int
    base_urls: Callable[[str | None], dict[str, str]]
    keepalive_s: float = 5.0  # a streamed call still running after this starts its stream with keepalives


def _json(status: int, body: Any) -> Response:
    return Response(dumps(body), status_code=status, media_type="application/json")


def _error(err: ProxyError, family: Family) -> Response:
    return _json(err.status(family), err.body(family))


def _family_of(request: Request) -> Family:
    path = request.url.path
    if "/messages" in path or "anthropic-version" in request.headers:
        return "anthropic"
    return "openai"


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refusing (413) anything over `limit` bytes before reading it all."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _wants_stream(body: bytes) -> bool:
    try:
        payload = loads(body)
    except DecodeError:
        return False
    return isinstance(payload, dict) and payload.get("stream") is True


_KEEPALIVE = {"anthropic": b'event: ping\ndata: {"type":"ping"}\n\n', "openai": b": keepalive\n\n"}


async def _keepalive_stream(task: "asyncio.Future[Reply]", family: str, every_s: float):
    """Keepalives until the call finishes, then its SSE events, or its error as an in-stream event
    (the status line is already sent): Anthropic `event: error`, OpenAI `data: {"error": ...}`."""
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


def build_app(handler: CallHandler, registry: RolloutRegistry, cfg: AppConfig) -> Starlette:
    def rollout_of(request: Request) -> RolloutState:
        key = request.path_params.get("key")
        if key is None:
            return registry.adhoc()
        state = registry.get(key)
        if state is None:
            raise unauthorized()
        return state

    def call_route(protocol: Protocol) -> Callable:
        async def endpoint(request: Request) -> Response:
            try:
                rollout = rollout_of(request)
            except ProxyError as e:  # no rollout: nothing to record
                return _error(e, protocol.family)  # type: ignore[arg-type]
            try:
                body = await read_body(request, cfg.max_body_bytes)
            except ProxyError as e:
                reply = await handler.reject(protocol, rollout, request.url.path, e)
                return Response(reply.body, status_code=reply.status, media_type=reply.media_type)
            task = asyncio.ensure_future(handler.handle(protocol, rollout, body, request.url.path))
            done, _ = await asyncio.wait({task}, timeout=cfg.keepalive_s)
            if not done and _wants_stream(body):
                # a slow generation: open the stream now, keep it alive, send the events when done
                return StreamingResponse(_keepalive_stream(task, protocol.family, cfg.keepalive_s),
                                         media_type="text/event-stream")
            reply = await task
            return Response(reply.body, status_code=reply.status, media_type=reply.media_type)

        return endpoint

    async def count_tokens(request: Request) -> Response:
        try:
            rollout = rollout_of(request)
            body = await read_body(request, cfg.max_body_bytes)
            return _json(200, anthropic.count_tokens_body(handler.count_tokens(ANTHROPIC, rollout, body)))
        except ProxyError as e:
            return _error(e, "anthropic")

    def model_entry(name: str) -> dict[str, Any]:
        return {"id": name, "object": "model", "created": 0, "owned_by": "harnessrl", "type": "model",
                "display_name": name, "created_at": "1970-01-01T00:00:00Z"}

    async def models(request: Request) -> Response:
        try:
            rollout_of(request)
        except ProxyError as e:
            return _error(e, _family_of(request))
        entry = model_entry(cfg.served_model)
        return _json(200, {"object": "list", "data": [entry], "has_more": False,
                           "first_id": entry["id"], "last_id": entry["id"]})

    async def model(request: Request) -> Response:
        try:
            rollout_of(request)
        except ProxyError as e:
            return _error(e, _family_of(request))
        return _json(200, model_entry(request.path_params["model"]))  # every name aliases the policy

    async def health(request: Request) -> Response:
        return _json(200, {"ok": True, "model": cfg.served_model, "policy_version": handler.engine.policy_version,
                           "time": time.time()})

    def check_admin(request: Request) -> None:
        token = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not cfg.admin_token or not hmac.compare_digest(token.encode(), cfg.admin_token.encode()):
            raise unauthorized()

    async def admin_register(request: Request) -> Response:
        try:
            check_admin(request)
            payload = loads(await read_body(request, cfg.max_body_bytes) or b"{}")
            rollout_id = payload.get("rollout_id") if isinstance(payload, dict) else None
            if not isinstance(rollout_id, str) or not rollout_id:
                raise bad_request("body must be {\"rollout_id\": \"<id>\"}", "rollout_id")
            try:
                key = registry.register(rollout_id)
            except ValueError as e:
                raise bad_request(str(e), "rollout_id") from None
        except DecodeError:
            return _error(bad_request("malformed JSON body"), "openai")
        except ProxyError as e:
            return _error(e, "openai")
        return _json(200, {"key": key, "rollout_id": rollout_id, "base_urls": cfg.base_urls(key)})

    async def admin_close(request: Request) -> Response:
        try:
            check_admin(request)
        except ProxyError as e:
            return _error(e, "openai")
        closed = registry.close(request.path_params["key"])
        if not closed:
            return _error(not_found("DELETE", "/admin/rollouts/<key>"), "openai")
        return _json(200, {"closed": True})

    async def admin_list(request: Request) -> Response:
        try:
            check_admin(request)
        except ProxyError as e:
            return _error(e, "openai")
        return _json(200, {"rollouts": [{"key": k, "rollout_id": r} for k, r in registry.active().items()]})

    async def http_error(request: Request, exc: Exception) -> Response:
        code = getattr(exc, "status_code", 500)
        if code in (404, 405):
            return _error(not_found(request.method, request.url.path), _family_of(request))
        return _error(internal(str(getattr(exc, "detail", exc))), _family_of(request))

    routes = []
    for prefix in ("", "/r/{key}"):
        routes += [
            Route(f"{prefix}/v1/chat/completions", call_route(OPENAI_CHAT), methods=["POST"]),
            Route(f"{prefix}/v1/messages", call_route(ANTHROPIC), methods=["POST"]),
            Route(f"{prefix}/v1/messages/count_tokens", count_tokens, methods=["POST"]),
            Route(f"{prefix}/v1/responses", call_route(OPENAI_RESPONSES), methods=["POST"]),
            Route(f"{prefix}/v1/models", models, methods=["GET"]),
            Route(f"{prefix}/v1/models/{{model:path}}", model, methods=["GET"]),
        ]
    routes += [
        Route("/health", health, methods=["GET"]),
        Route("/admin/rollouts", admin_register, methods=["POST"]),
        Route("/admin/rollouts", admin_list, methods=["GET"]),
        Route("/admin/rollouts/{key}", admin_close, methods=["DELETE"]),
    ]
    return Starlette(routes=routes, exception_handlers={HTTPException: http_error, Exception: http_error})
