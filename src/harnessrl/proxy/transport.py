"""The HTTP connection layer under the app: uvicorn's own protocol, plus three guards.

- Framing errors (a request uvicorn cannot parse) are answered with a 400 in the error shape of
  the protocol the request line names (OpenAI Chat when unknown), not uvicorn's plain text.
- A request's headers must be complete within `header_timeout_s` of its first byte; otherwise it
  gets a 408 and the connection is closed (slowloris). The late-server grace below extends that
  once at most, to 2 x `header_timeout_s`: a client that keeps trickling bytes cannot hold its
  connection open by always having a byte in flight when the timer fires.
- A request head (request line + headers) over `max_header_bytes` gets a typed 431.
- An early answer (400, 408, 431: the client may still be sending) is followed by a lingering
  close: the write side is shut, and input is read and dropped (up to `LINGER_BYTES`, for
  `LINGER_S`) until the client closes. Closing with unread input would reset the connection and
  the client would see "connection reset" instead of the answer. Bodies have their own timeout in the app
  (app.py). A connection that has sent nothing yet is idle, not slow: like an idle keep-alive
  connection it is closed without an answer after `idle_timeout_s` (the server's keep-alive).
  (Timing a fresh connection with the header timeout cut starved clients: a client that opened a
  connection and was descheduled before writing its request got a 408 it never read, then a
  connection reset for the request it sent; 48 of 2,951 calls at 1,000 sessions on a loaded
  machine, docs/benchmarks.md.)
- At most `max_connections_per_client` open connections per client address; more are answered
  503 + Retry-After and closed at once. On loopback every local client shares 127.0.0.1, so there
  this bounds the descriptors all clients together can hold (docs/proxy.md).

A stalled server must not close a connection whose request has already arrived. uvloop (libuv)
runs due timers before it reads the sockets in each loop iteration, so after a stall (a starved
process, a long callback) the keep-alive, idle or header timer of a connection fires while the
client's next request sits unread in the socket; closing then resets the connection (RST: the
client gets "connection reset", no answer, and nothing is recorded). These timers therefore peek
at the socket first: bytes waiting means the server is late, not the client, and the connection
is kept.
"""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from uvicorn.protocols.http.auto import AutoHTTPProtocol

from harnessrl.proxy.errors import ProxyError, bad_request
from harnessrl.proxy.jsonutil import dumps
from harnessrl.proxy.protocols import protocol_for

_REASON = {400: b"Bad Request", 408: b"Request Timeout", 431: b"Request Header Fields Too Large",
           503: b"Service Unavailable"}
DEFAULT_MAX_HEADER_BYTES = 64 * 1024  # a request head (request line + headers) larger than this: 431
LINGER_BYTES = 16 * 1024 * 1024  # after an early answer: input dropped before closing, at most
LINGER_S = 5.0  # ... and for at most this long
# scope["extensions"] key: a () -> bool telling whether the request's connection is still open
# (app.py marks a call delivered only then)
CONNECTION_OPEN = "harnessrl.connection_open"


@dataclass
class ConnectionGuard:
    """Limits shared by every connection of one server (one event loop: no lock needed)."""

    header_timeout_s: float = 15.0
    max_connections_per_client: int = 2048
    idle_timeout_s: float = 75.0  # a connection that has sent nothing yet is closed after this
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    loop: asyncio.AbstractEventLoop | None = None  # the server's event loop (set by its first connection)
    open_by_client: Counter = field(default_factory=Counter)
    refused: int = 0
    timed_out: int = 0
    idle_closed: int = 0  # connections closed having sent nothing within idle_timeout_s
    late_reads: int = 0  # timers that found the client's bytes waiting unread (a stalled server): kept open
    headers_too_large: int = 0  # request heads over max_header_bytes (431)

    def stats(self) -> dict[str, int]:
        """Open connections now, and the connections refused / timed out / closed idle / kept
        after a stall / refused for oversized headers so far (GET /health)."""
        return {"open": sum(self.open_by_client.values()), "refused": self.refused, "header_timeouts": self.timed_out,
                "idle_closed": self.idle_closed, "late_reads": self.late_reads,
                "headers_too_large": self.headers_too_large}


def bytes_waiting(transport: asyncio.BaseTransport) -> bool:
    """Whether the peer's bytes wait unread in the transport's socket (a peek on a duplicate of its
    descriptor: nothing is consumed, the connection is untouched)."""
    sock = transport.get_extra_info("socket")
    if sock is None:
        return False
    try:
        with socket.fromfd(sock.fileno(), sock.family, sock.type) as dup:
            return bool(dup.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except OSError:  # nothing waiting (EAGAIN), or the socket is gone
        return False


def guarded_protocol(guard: ConnectionGuard) -> type:
    """A uvicorn HTTP protocol class enforcing `guard` (pass it as `uvicorn.Config(http=...)`)."""

    class GuardedHTTPProtocol(AutoHTTPProtocol):  # type: ignore[misc, valid-type]
        _guard = guard

        def connection_made(self, transport: asyncio.Transport) -> None:
            super().connection_made(transport)
            self._guard.loop = self._guard.loop or asyncio.get_running_loop()
            peer = transport.get_extra_info("peername")
            self._peer = peer[0] if isinstance(peer, tuple) and peer else "local"
            self._counted = self._guard.open_by_client[self._peer] < self._guard.max_connections_per_client
            self._header_timer: asyncio.TimerHandle | None = None
            self._idle_timer: asyncio.TimerHandle | None = None
            self._linger_timer: asyncio.TimerHandle | None = None
            self._armed_cycle: Any = None
            self._exposed_cycle: Any = None
            self._head_bytes = 0  # bytes of the request head received so far (while incomplete)
            self._head_hard_deadline = 0.0
            self._lingering = False
            self._linger_left = 0
            if not self._counted:
                self._guard.refused += 1
                err = ProxyError("overloaded", f"too many open connections from {self._peer} "
                                               f"(limit {self._guard.max_connections_per_client})", retry_after=1)
                self._answer_and_close(503, err, linger=False)
                return
            self._guard.open_by_client[self._peer] += 1
            self._idle_timer = asyncio.get_running_loop().call_later(self._guard.idle_timeout_s, self._on_idle_timeout)

        def connection_lost(self, exc: Exception | None) -> None:
            if getattr(self, "_counted", False):
                self._counted = False
                self._guard.open_by_client[self._peer] -= 1
                if self._guard.open_by_client[self._peer] <= 0:
                    del self._guard.open_by_client[self._peer]
            self._cancel_header_timer()
            self._cancel_idle_timer()
            if self._linger_timer is not None:
                self._linger_timer.cancel()
                self._linger_timer = None
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._lingering:  # answered early: drop the rest of what the client sends
                self._linger_left -= len(data)
                if self._linger_left <= 0:
                    self.transport.close()
                return
            self._cancel_idle_timer()  # the first byte: from now on the header timeout applies
            super().data_received(data)
            self._expose_connection_state()
            if self.transport.is_closing():
                return
            if not self._between_requests():  # a request's head is complete
                self._head_bytes = 0
                return
            self._head_bytes += len(data)
            if self._head_bytes > self._guard.max_header_bytes:
                self._guard.headers_too_large += 1
                self._answer_and_close(431, ProxyError(
                    "headers_too_large", f"request line and headers exceed the proxy limit of "
                                         f"{self._guard.max_header_bytes} bytes"))
                return
            if self._header_timer is None:
                self._arm_header_timer()

        def eof_received(self) -> bool | None:
            if self._lingering:  # the client is done: close now
                self.transport.close()
                return None
            return super().eof_received()

        def timeout_keep_alive_handler(self) -> None:
            """uvicorn's idle keep-alive timeout, unless the next request is already waiting."""
            if not self.transport.is_closing() and bytes_waiting(self.transport):
                self._guard.late_reads += 1  # data_received comes next in this loop iteration and
                self.timeout_keep_alive_task = self.loop.call_later(  # cancels this timer
                    self.timeout_keep_alive, self.timeout_keep_alive_handler)
                return
            super().timeout_keep_alive_handler()

        def send_400_response(self, msg: str) -> None:
            self._answer_and_close(400, bad_request(f"malformed HTTP request: {msg}"))

        # -- helpers -------------------------------------------------------------------------

        def _expose_connection_state(self) -> None:
            """Give a new request's scope a way to ask whether its connection is still open."""
            cycle = getattr(self, "cycle", None)
            if cycle is None or cycle is self._exposed_cycle:
                return
            self._exposed_cycle = cycle
            scope = getattr(cycle, "scope", None)
            if isinstance(scope, dict):
                scope.setdefault("extensions", {})[CONNECTION_OPEN] = lambda: not cycle.disconnected

        def _between_requests(self) -> bool:
            cycle = getattr(self, "cycle", None)
            return cycle is None or cycle.response_complete

        def _arm_header_timer(self) -> None:
            self._armed_cycle = getattr(self, "cycle", None)
            loop = asyncio.get_running_loop()
            self._head_hard_deadline = loop.time() + 2 * self._guard.header_timeout_s
            self._header_timer = loop.call_later(self._guard.header_timeout_s, self._on_header_timeout)

        def _cancel_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _cancel_idle_timer(self) -> None:
            if self._idle_timer is not None:
                self._idle_timer.cancel()
                self._idle_timer = None

        def _on_idle_timeout(self) -> None:
            """Nothing sent since the connection opened: close it quietly, as an idle keep-alive."""
            self._idle_timer = None
            if self.transport.is_closing():
                return
            if bytes_waiting(self.transport):  # the first bytes are here, unread: the loop is late
                self._guard.late_reads += 1
                return  # data_received comes next and the header timeout takes over
            self._guard.idle_closed += 1
            self.transport.close()

        def _on_header_timeout(self) -> None:
            self._header_timer = None
            if getattr(self, "cycle", None) is not self._armed_cycle or self.transport.is_closing():
                return  # a request's headers arrived meanwhile (its body has the app's timeout)
            if not self._between_requests():
                return
            loop = asyncio.get_running_loop()
            left = self._head_hard_deadline - loop.time()
            if left > 0 and bytes_waiting(self.transport):  # the loop may be late: look again shortly
                self._guard.late_reads += 1
                self._header_timer = loop.call_later(min(1.0, self._guard.header_timeout_s, left),
                                                     self._on_header_timeout)
                return
            self._guard.timed_out += 1
            self._answer_and_close(408, ProxyError("timeout", f"request headers did not arrive within "
                                                              f"{self._guard.header_timeout_s:g} s"))

        def _answer_and_close(self, status: int, err: ProxyError, linger: bool = True) -> None:
            url = getattr(self, "url", b"") or b""
            wire = protocol_for(url.decode("latin-1") if isinstance(url, bytes) else str(url))
            body = dumps(wire.error_body(err))
            head = [b"HTTP/1.1 %d %s" % (status, _REASON[status]), b"content-type: application/json",
                    b"content-length: %d" % len(body), b"connection: close"]
            head += [f"{k}: {v}".encode() for k, v in err.headers().items() if k != "connection"]
            if self.transport.is_closing():
                return
            self.transport.write(b"\r\n".join(head) + b"\r\n\r\n" + body)
            if linger and self.transport.can_write_eof():
                self._linger()
            else:
                self.transport.close()

        def _linger(self) -> None:
            """Shut the write side, drop what the client still sends, close on its EOF (or after
            LINGER_BYTES / LINGER_S)."""
            self._lingering = True
            self._linger_left = LINGER_BYTES
            self._cancel_header_timer()
            self._cancel_idle_timer()
            self.transport.write_eof()
            self._linger_timer = asyncio.get_running_loop().call_later(LINGER_S, self.transport.close)

    return GuardedHTTPProtocol
