"""HTTP helpers shared by the app and the admin routes: JSON responses, protocol-shaped errors,
bounded body reading."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from harnessrl.proxy.errors import Family, ProxyError, too_large
from harnessrl.proxy.jsonutil import dumps


def json_response(status: int, body: Any) -> Response:
    return Response(dumps(body), status_code=status, media_type="application/json")


def error_response(err: ProxyError, family: Family) -> Response:
    return json_response(err.status(family), err.body(family))


def family_of(request: Request) -> Family:
    """The error shape a client on this route expects (for routes outside one protocol)."""
    if "/messages" in request.url.path or "anthropic-version" in request.headers:
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
