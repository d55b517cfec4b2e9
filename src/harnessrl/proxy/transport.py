"""The HTTP connection layer under the app: uvicorn's own protocol, plus three guards.

- Framing errors (a request uvicorn cannot parse) are answered with a 400 in the error shape of
  the protocol the request line names (OpenAI Chat when unknown), not uvicorn's plain text.
- A connection must complete its request headers within `header_timeout_s` of its opening or of
  its first byte after a finished response; otherwise it gets a 408 and is closed (slowloris).
  Bodies have their own timeout in the app (app.py).
- At most `max_connections_per_client` open connections per client address; more are answered
  503 + Retry-After and closed at once. On loopback every local client shares 127.0.0.1, so there
  this bounds the descriptors all clients together can hold (docs/proxy.md).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

from harnessrl.proxy.errors import ProxyError, bad_request
from harnessrl.proxy.jsonutil import dumps
from harnessrl.proxy.protocols import protocol_for

_REASON = {400: b"Bad Request", 408: b"Request Timeout", 503: b"Service Unavailable"}


@dataclass
class ConnectionGuard:
    """Limits shared by every connection of one server (one event loop: no lock needed)."""

    header_timeout_s: float = 15.0
    max_connections_per_client: int = 2048
    open_by_client: Counter = field(default_factory=Counter)
    refused: int = 0
    timed_out: int = 0


def guarded_protocol(guard: ConnectionGuard) -> type:
    """A uvicorn HTTP protocol class enforcing `guard` (pass it as `uvicorn.Config(http=...)`)."""

    class GuardedHTTPProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        _guard = guard

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            peer = transport.get_extra_info("peername")
            self._peer = peer[0] if isinstance(peer, tuple) and peer else "local"
            self._counted = self._guard.open_by_client[self._peer] < self._guard.max_connections_per_client
            self._header_timer: asyncio.TimerHandle | None = None
            self._armed_cycle: Any = None
            if not self._counted:
                self._guard.refused += 1
                err = ProxyError("overloaded", f"too many open connections from {self._peer} "
                                               f"(limit {self._guard.max_connections_per_client})", retry_after=1)
                self._answer_and_close(503, err)
                return
            self._guard.open_by_client[self._peer] += 1
            self._arm_header_timer()

        def connection_lost(self, exc: Exception | None) -> None:
            if getattr(self, "_counted", False):
                self._counted = False
                self._guard.open_by_client[self._peer] -= 1
                if self._guard.open_by_client[self._peer] <= 0:
                    del self._guard.open_by_client[self._peer]
            self._cancel_header_timer()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._header_timer is None and not self.transport.is_closing() and self._between_requests():
                self._arm_header_timer()

        def send_400_response(self, msg: str) -> None:
            self._answer_and_close(400, bad_request(f"malformed HTTP request: {msg}"))

        # -- helpers -------------------------------------------------------------------------

        def _between_requests(self) -> bool:
            cycle = getattr(self, "cycle", None)
            return cycle is None or cycle.response_complete

        def _arm_header_timer(self) -> None:
            self._armed_cycle = getattr(self, "cycle", None)
            self._header_timer = asyncio.get_running_loop().call_later(self._guard.header_timeout_s,
                                                                        self._on_header_timeout)

        def _cancel_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _on_header_timeout(self) -> None:
            self._header_timer = None
            if getattr(self, "cycle", None) is not self._armed_cycle or self.transport.is_closing():
                return  # a request's headers arrived meanwhile (its body has the app's timeout)
            if not self._between_requests():
                return
            self._guard.timed_out += 1
            self._answer_and_close(408, ProxyError("timeout", f"request headers did not arrive within "
                                                              f"{self._guard.header_timeout_s:g} s"))

        def _answer_and_close(self, status: int, err: ProxyError) -> None:
            url = getattr(self, "url", b"") or b""
            wire = protocol_for(url.decode("latin-1") if isinstance(url, bytes) else str(url))
            body = dumps(wire.error_body(err))
            head = [b"HTTP/1.1 %d %s" % (status, _REASON[status]), b"content-type: application/json",
                    b"content-length: %d" % len(body), b"connection: close"]
            head += [f"{k}: {v}".encode() for k, v in err.headers().items() if k != "connection"]
            if not self.transport.is_closing():
                self.transport.write(b"\r\n".join(head) + b"\r\n\r\n" + body)
                self.transport.close()

    return GuardedHTTPProtocol
