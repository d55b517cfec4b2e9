"""HTTP helpers shared by the app and the admin routes: JSON responses, protocol-shaped errors,
bounded body reading (one rule for every route, see app.py)."""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from harnessrl.errors import HarnessRLError
from harnessrl.proxy.errors import ProxyError, body_timeout, too_large
from harnessrl.proxy.jsonutil import dumps
from harnessrl.proxy.wire import WireProtocol


class ClientGone(HarnessRLError):
    """The client closed the connection before its body was complete (nothing to answer)."""


def json_response(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(dumps(body), status_code=status, media_type="application/json", headers=headers)


def error_response(wire: WireProtocol, err: ProxyError) -> Response:
    return json_response(wire.error_status(err), wire.error_body(err), err.headers())


async def read_body(request: Request, limit: int, timeout_s: float) -> bytes:
    """The request body: 413 past `limit` bytes (a declared Content-Length is checked before
    reading), 408 when it is not complete within `timeout_s`."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(limit)
    try:
        return await asyncio.wait_for(_read(request, limit), timeout_s)
    except asyncio.TimeoutError:
        raise body_timeout(timeout_s) from None
    except ClientDisconnect:
        raise ClientGone() from None


async def _read(request: Request, limit: int) -> bytes:
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)
