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


DRAIN_LIMIT_BYTES = 64 * 1024 * 1024  # a body over the limit is still read (and dropped) up to this


async def read_body(request: Request, limit: int, timeout_s: float, drain_limit: int = DRAIN_LIMIT_BYTES) -> bytes:
    """The request body: 413 past `limit` bytes, 408 when it is not complete within `timeout_s`.

    A body over the limit is read to its end and dropped before the 413 goes out, as long as it
    stays within `drain_limit` bytes (declared or received) and `timeout_s`: a client that writes
    its whole body before reading (Python's urllib, many simple clients) then reads the 413,
    where an early answer and close would reset its connection under its unsent bytes. A body
    declared or found larger than `drain_limit` is answered at once."""
    declared = request.headers.get("content-length")
    size = int(declared) if declared is not None and declared.isdigit() else None
    if size is not None and size > max(limit, drain_limit):
        raise too_large(limit)
    over = size is not None and size > limit
    try:
        return await asyncio.wait_for(_read(request, limit, max(limit, drain_limit), over), timeout_s)
    except asyncio.TimeoutError:
        raise (too_large(limit) if over else body_timeout(timeout_s)) from None
    except ClientDisconnect:
        raise ClientGone() from None


async def _read(request: Request, limit: int, drain_limit: int, over: bool) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > drain_limit:
            raise too_large(limit)
        if size > limit:
            over, chunks = True, []  # keep reading to the end, keep nothing
        elif not over:
            chunks.append(chunk)
    if over:
        raise too_large(limit)
    return b"".join(chunks)
