"""Admin routes: a runner in another process registers and closes rollout keys. All of them sit
under one Mount whose `AdminAuth` middleware checks `Authorization: Bearer <admin token>`.

    POST   /admin/rollouts {"rollout_id": ..., "max_calls": N, "replay": {"parent": ..., "branch_call": J}}
                                               -> {"key", "rollout_id", "base_urls"}
    GET    /admin/rollouts                     -> {"rollouts": [{"key", "rollout_id"}, ...]}
    DELETE /admin/rollouts/{key}               -> {"closed": true}
    GET    /admin/info                         -> {"run_dir", "served_model", "tool_format", "serving"}
"""

from __future__ import annotations

import asyncio
import hmac
from typing import TYPE_CHECKING, Any, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from harnessrl.proxy.errors import admin_disabled, admin_unauthorized, bad_request, not_found
from harnessrl.proxy.httputil import json_response, read_body
from harnessrl.proxy.jsonutil import DecodeError, TooDeep, loads_bounded
from harnessrl.proxy.rollouts import RolloutRegistry

if TYPE_CHECKING:
    from harnessrl.proxy.replay import ReplayScript


class AdminAuth:
    """ASGI middleware: requests pass only with the admin bearer token (401 / 403 otherwise)."""

    def __init__(self, app: ASGIApp, token: str | None):
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            if not self.token:
                raise admin_disabled()
            sent = Request(scope).headers.get("authorization", "")
            token = bearer_token(sent)
            if not hmac.compare_digest(token.encode(), self.token.encode()):
                raise admin_unauthorized(bool(sent), well_formed=bool(token))
        await self.app(scope, receive, send)


def bearer_token(header: str) -> str:
    """The token of `Authorization: Bearer <token>` (RFC 6750: the scheme, one space, the token;
    the scheme is case-insensitive); "" for any other shape: a bare token, another scheme, extra
    spaces or words."""
    scheme, sep, token = header.partition(" ")
    if not sep or scheme.lower() != "bearer" or not token or any(c.isspace() for c in token):
        return ""
    return token


def admin_routes(registry: RolloutRegistry, max_body_bytes: int, body_timeout_s: float,
                 base_urls: Callable[[str | None], dict[str, str]], drain_bytes: int,
                 flush: Callable[[], None] = lambda: None,
                 load_replay: Callable[[str, int], ReplayScript] | None = None,
                 info: Callable[[], dict[str, Any]] = dict) -> list[Route]:
    """`flush`: commits queued delivery marks (a closed key's calls read final once DELETE answers);
    `load_replay(parent, branch_call)`: the ReplayScript of a branch (proxy/replay.py)."""
    def no_replay(parent: str, branch_call: int) -> ReplayScript:
        raise ValueError("this proxy cannot replay: it has no run store")

    load_replay = load_replay or no_replay

    async def rollouts(request: Request) -> Response:
        if request.method == "GET":
            return json_response(200, {"rollouts": [{"key": k, "rollout_id": r} for k, r in registry.active().items()]})
        payload = _json_object(await read_body(request, max_body_bytes, body_timeout_s, drain_bytes))
        rollout_id = payload.get("rollout_id")
        if not isinstance(rollout_id, str) or not rollout_id:
            raise bad_request('body must be {"rollout_id": "<id>", "max_calls": <int, optional>}', "rollout_id")
        max_calls = payload.get("max_calls")
        if max_calls is not None and (not isinstance(max_calls, int) or isinstance(max_calls, bool) or max_calls < 1):
            raise bad_request("max_calls must be a positive integer or absent", "max_calls")
        replay = payload.get("replay")
        if replay is not None and not _replay_shape(replay):
            raise bad_request('replay must be {"parent": "<rollout id>", "branch_call": <positive int>}', "replay")
        try:
            script = None if replay is None else await asyncio.to_thread(load_replay, replay["parent"], replay["branch_call"])
            key = registry.register(rollout_id, max_calls=max_calls, replay=script)
        except ValueError as e:
            raise bad_request(str(e), "replay" if replay is not None else "rollout_id") from None
        return json_response(200, {"key": key, "rollout_id": rollout_id, "base_urls": base_urls(key)})

    async def close(request: Request) -> Response:
        if not registry.close(request.path_params["key"]):
            raise not_found("DELETE", "/admin/rollouts/<key>")
        await asyncio.to_thread(flush)
        return json_response(200, {"closed": True})

    async def describe(request: Request) -> Response:
        return json_response(200, info())

    return [Route("/rollouts", rollouts, methods=["GET", "POST"]), Route("/rollouts/{key}", close, methods=["DELETE"]),
            Route("/info", describe, methods=["GET"])]


def _replay_shape(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("parent"), str) and bool(value["parent"])
            and isinstance(value.get("branch_call"), int) and not isinstance(value["branch_call"], bool)
            and value["branch_call"] >= 1)


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        payload = loads_bounded(body or b"{}")
    except TooDeep as e:
        raise bad_request(f"invalid request: {e}") from None
    except (DecodeError, UnicodeDecodeError):
        raise bad_request("malformed JSON body") from None
    if not isinstance(payload, dict):
        raise bad_request('body must be {"rollout_id": "<id>"}', "rollout_id")
    return payload
