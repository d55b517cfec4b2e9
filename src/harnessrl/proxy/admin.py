"""Admin routes (bearer admin token): a runner in another process registers and closes rollout keys.

    POST   /admin/rollouts {"rollout_id": ...} -> {"key", "rollout_id", "base_urls"}
    GET    /admin/rollouts                     -> {"rollouts": [{"key", "rollout_id"}, ...]}
    DELETE /admin/rollouts/{key}               -> {"closed": true}
"""

from __future__ import annotations

import hmac
from typing import Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from harnessrl.proxy.errors import ProxyError, bad_request, not_found, unauthorized
from harnessrl.proxy.httputil import error_response, json_response, read_body
from harnessrl.proxy.jsonutil import DecodeError, loads
from harnessrl.proxy.rollouts import RolloutRegistry


def admin_routes(registry: RolloutRegistry, admin_token: str | None, max_body_bytes: int,
                 base_urls: Callable[[str | None], dict[str, str]]) -> list[Route]:
    def check(request: Request) -> None:
        token = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not admin_token or not hmac.compare_digest(token.encode(), admin_token.encode()):
            raise unauthorized()

    async def register(request: Request) -> Response:
        try:
            check(request)
            payload = loads(await read_body(request, max_body_bytes) or b"{}")
            rollout_id = payload.get("rollout_id") if isinstance(payload, dict) else None
            if not isinstance(rollout_id, str) or not rollout_id:
                raise bad_request('body must be {"rollout_id": "<id>"}', "rollout_id")
            try:
                key = registry.register(rollout_id)
            except ValueError as e:
                raise bad_request(str(e), "rollout_id") from None
        except DecodeError:
            return error_response(bad_request("malformed JSON body"), "openai")
        except ProxyError as e:
            return error_response(e, "openai")
        return json_response(200, {"key": key, "rollout_id": rollout_id, "base_urls": base_urls(key)})

    async def close(request: Request) -> Response:
        try:
            check(request)
        except ProxyError as e:
            return error_response(e, "openai")
        if not registry.close(request.path_params["key"]):
            return error_response(not_found("DELETE", "/admin/rollouts/<key>"), "openai")
        return json_response(200, {"closed": True})

    async def listing(request: Request) -> Response:
        try:
            check(request)
        except ProxyError as e:
            return error_response(e, "openai")
        return json_response(200, {"rollouts": [{"key": k, "rollout_id": r} for k, r in registry.active().items()]})

    return [
        Route("/admin/rollouts", register, methods=["POST"]),
        Route("/admin/rollouts", listing, methods=["GET"]),
        Route("/admin/rollouts/{key}", close, methods=["DELETE"]),
    ]
