"""The sandbox's HTTP relay to the proxy: every request must stay under the rollout's own key.

Why HTTP-aware. The relay used to copy raw bytes, so a sandbox could call the proxy's unkeyed
``/v1/...`` routes (recorded as rollout ``adhoc``) or another rollout's ``/r/<other key>/...``
(its calls then polluted that rollout's record). Checking only the first request line of a
connection is not enough: keep-alive and pipelining put many requests on one connection, and a
body (chunked or not) can hide a second request that a lax check would miss while the server
would not. So the relay parses the sandbox's side as an HTTP/1.1 server would and re-sends each
request it accepts to the proxy as an HTTP/1.1 client, both with ``h11`` (the strict, sans-I/O
parser behind uvicorn and httpx). What the proxy receives is therefore exactly what the relay
checked: framing is re-generated from the parsed request, never passed through, so there is no
request smuggling between the two parsers.

Rules, for each request on a connection (the first and every later one):
- its target must start with ``/r/<key>/`` literally (origin form; no absolute form, no
  ``CONNECT``, no ``Upgrade``). Keys are URL-safe, so percent-escapes after the prefix cannot move
  the request to another key: the proxy's routes match ``/r/{key}/`` on the decoded path and the
  prefix decodes to itself. Anything else is answered HERE with a typed 403 in the caller's
  protocol shape (Anthropic for ``/v1/messages...`` or an ``anthropic-version`` header, OpenAI
  otherwise); the proxy never sees it. The rejected request's body is read and dropped and the
  connection stays usable (closing with unread input would reset the connection and could
  lose the 403).
- malformed HTTP gets a typed 400 and the connection is closed; a request head (line + headers)
  over ``MAX_HEADER_BYTES`` gets a typed 431, the proxy's own limit and answer. Both closes
  linger: the relay shuts its write side and reads and drops what the sandbox still sends (up to
  ``LINGER_BYTES`` / ``LINGER_S``), so a client still writing a 2 MiB head reads the answer
  instead of a connection reset.
- ``Expect: 100-continue`` is answered by the relay and not forwarded.

Everything else flows through unchanged in meaning: request and response bodies are forwarded
as they arrive (SSE streams stay streams), keep-alive works (the proxy-side connection lives as
long as the sandbox-side one; when the proxy closes an idle connection the relay closes the
sandbox's too, as a direct connection would), HTTP/1.0 clients get close-delimited responses.
One thread per connection, driven by ``select`` on both sockets; a slow reader blocks only its
own connection.
"""

from __future__ import annotations

import json
import select
import socket
import time
from typing import Any, NoReturn

import h11

from harnessrl.sandbox.base import SandboxError

MAX_HEADER_BYTES = 64 * 1024  # the proxy's limit too (proxy/transport.py)
LINGER_BYTES = 16 * 1024 * 1024  # after an early answer: input dropped before closing, at most
LINGER_S = 5.0  # ... and for at most this long


def _family(target: bytes, headers: list[tuple[bytes, bytes]]) -> str:
    path = target.split(b"?", 1)[0]
    if b"/v1/messages" in path or any(name == b"anthropic-version" for name, _ in headers):
        return "anthropic"
    return "openai"


def error_body(family: str, status: int, message: str) -> bytes:
    """A protocol-shaped error (what the proxy would send for the same status)."""
    if family == "anthropic":
        kind = {400: "invalid_request_error", 403: "permission_error",
                431: "request_too_large"}.get(status, "api_error")
        body: dict[str, Any] = {"type": "error", "error": {"type": kind, "message": message}}
    else:
        code = {400: "bad_request", 403: "forbidden", 431: "request_header_fields_too_large"}.get(status, "bad_gateway")
        kind = "invalid_request_error" if status < 500 else "server_error"
        body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return json.dumps(body).encode()


class RelayClosed(SandboxError):
    """(Internal) the relay is done with this connection pair; never leaves HttpRelay.serve."""


class HttpRelay:
    """Relays one sandbox connection (``inner``) to one proxy connection (``outer``)."""

    def __init__(self, inner: socket.socket, outer: socket.socket, key: str) -> None:
        self.inner, self.outer = inner, outer
        self.prefix = f"/r/{key}/".encode()
        self.down = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEADER_BYTES)  # the sandbox
        self.up = h11.Connection(h11.CLIENT)  # the proxy
        self.discarding = False  # the current request was rejected: drop its body
        self.sent_continue = False
        self.up_broken = False  # the proxy stopped reading our request (it answered early)
        self.inner_eof = self.outer_eof = False
        self.head_sample = b""  # the start of the request being received (its family, if it fails)

    # -- the loop ---------------------------------------------------------------------------
    def serve(self) -> None:
        try:
            while True:
                watch = [s for s, eof in ((self.inner, self.inner_eof), (self.outer, self.outer_eof)) if not eof]
                if not watch:
                    return
                ready, _, _ = select.select(watch, [], [])
                for sock in ready:
                    try:
                        data = sock.recv(65536)
                    except OSError:
                        data = b""
                    if sock is self.inner:
                        self.inner_eof = not data
                        if self.down.their_state is h11.IDLE and len(self.head_sample) < 1024:
                            self.head_sample += data[:1024]
                        self.down.receive_data(data)
                        self._from_sandbox()
                    else:
                        self.outer_eof = not data
                        self.up.receive_data(data)
                        self._from_proxy()
                        self._from_sandbox()  # a finished cycle may release pipelined requests
        except RelayClosed:
            return

    # -- sandbox -> proxy ---------------------------------------------------------------------
    def _from_sandbox(self) -> None:
        while True:
            try:
                event = self.down.next_event()
            except h11.RemoteProtocolError as e:
                if e.error_status_hint == 431:
                    self._fail_down(431, f"request line and headers exceed the relay's limit of "
                                         f"{MAX_HEADER_BYTES} bytes", linger=True)
                self._fail_down(400, f"malformed HTTP request: {e}", linger=True)
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Request):
                self._request(event)
            elif isinstance(event, h11.Data):
                if not self.discarding:
                    self._send_up(h11.Data(data=event.data))
            elif isinstance(event, h11.EndOfMessage):
                if self.discarding:
                    self.discarding = False
                    self._next_cycle()
                else:
                    self._send_up(h11.EndOfMessage(headers=event.headers))
                    self._next_cycle()
            elif isinstance(event, h11.ConnectionClosed):
                raise RelayClosed

    def _request(self, req: h11.Request) -> None:
        headers = list(req.headers)
        allowed = req.target.startswith(self.prefix) and req.method != b"CONNECT" and not any(
            name == b"upgrade" for name, _ in headers
        )
        if not allowed:
            waiting = self.down.they_are_waiting_for_100_continue  # then no body follows: close
            self.discarding = True
            shown = req.target[:200].decode("latin-1")
            self._answer(
                403,
                _family(req.target, headers),
                f"forbidden: this sandbox may only call its own rollout's routes "
                f"({self.prefix.decode()}...), not {req.method.decode('latin-1')} {shown}",
                close=waiting,
            )
            if waiting:
                raise RelayClosed
            return
        if self.down.they_are_waiting_for_100_continue:
            self._send_down(h11.InformationalResponse(status_code=100, headers=[]))
            self.sent_continue = True
        headers = [(n, v) for n, v in headers if n != b"expect"]
        self._send_up(h11.Request(method=req.method, target=req.target, headers=headers))

    def _send_up(self, event: Any) -> None:
        if self.up_broken:
            return
        try:
            self.outer.sendall(self.up.send(event) or b"")
        except (OSError, h11.LocalProtocolError):
            self.up_broken = True  # keep reading: the proxy's answer may already be on its way

    # -- proxy -> sandbox ---------------------------------------------------------------------
    def _from_proxy(self) -> None:
        while True:
            try:
                event = self.up.next_event()
            except h11.RemoteProtocolError as e:
                self._fail_down(502, f"the proxy connection broke mid-response: {e}")
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.InformationalResponse):
                if not (event.status_code == 100 and self.sent_continue):
                    self._send_down(h11.InformationalResponse(status_code=event.status_code, headers=event.headers))
            elif isinstance(event, h11.Response):
                self._send_down(h11.Response(status_code=event.status_code, headers=list(event.headers),
                                             reason=event.reason))
            elif isinstance(event, h11.Data):
                self._send_down(h11.Data(data=event.data))
            elif isinstance(event, h11.EndOfMessage):
                self._send_down(h11.EndOfMessage(headers=event.headers))
                self._next_cycle()
            elif isinstance(event, h11.ConnectionClosed):
                if self.down.our_state is h11.SEND_RESPONSE:  # the request got no answer at all
                    self._fail_down(502, "the proxy closed the connection without answering")
                raise RelayClosed  # idle: mirror the proxy closing its keep-alive connection

    # -- both -----------------------------------------------------------------------------------
    def _send_down(self, event: Any) -> None:
        try:
            self.inner.sendall(self.down.send(event) or b"")
        except OSError:
            raise RelayClosed from None

    def _answer(self, status: int, family: str, message: str, close: bool = False) -> None:
        body = error_body(family, status, message)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        head = h11.Response(status_code=status, headers=headers + ([(b"connection", b"close")] if close else []))
        wire = b"".join(self.down.send(e) or b"" for e in (head, h11.Data(data=body), h11.EndOfMessage()))
        try:
            self.inner.sendall(wire)  # one write: a client's single read gets the whole answer
        except OSError:
            raise RelayClosed from None

    def _fail_down(self, status: int, message: str, linger: bool = False) -> NoReturn:
        if self.down.our_state in (h11.IDLE, h11.SEND_RESPONSE):  # IDLE: the request never parsed
            try:
                line = self.head_sample.split(b"\r\n", 1)[0].split(b" ")
                self._answer(status, _family(line[1] if len(line) > 1 else b"", []), message, close=True)
                if linger:
                    self._linger()
            except (RelayClosed, h11.LocalProtocolError, OSError):
                pass
        raise RelayClosed

    def _linger(self) -> None:
        """After an early answer: shut our write side, then read and drop what the sandbox still
        sends until it closes (bounded), so closing does not reset the connection under it."""
        self.inner.shutdown(socket.SHUT_WR)
        left = LINGER_BYTES
        deadline = time.monotonic() + LINGER_S
        while left > 0 and not self.inner_eof:
            wait = deadline - time.monotonic()
            if wait <= 0 or not select.select([self.inner], [], [], wait)[0]:
                return
            data = self.inner.recv(65536)
            self.inner_eof = not data
            left -= len(data)

    def _next_cycle(self) -> None:
        """Both sides finished a request/response: start the next one. Pipelined requests wait
        in h11's buffer meanwhile; the callers' loops read them next (no recursion)."""
        finished = (h11.DONE, h11.MUST_CLOSE)
        if self.down.our_state not in finished or self.down.their_state not in finished:
            return  # the response or the request body is still under way
        if h11.MUST_CLOSE in (self.down.our_state, self.down.their_state):
            raise RelayClosed  # "Connection: close" (either side) or HTTP/1.0: this was the last one
        up_states = (self.up.our_state, self.up.their_state)
        if up_states == (h11.DONE, h11.DONE):
            if self.up_broken:
                raise RelayClosed
            self.up.start_next_cycle()
        elif up_states != (h11.IDLE, h11.IDLE):  # the proxy will close (or broke): so do we
            raise RelayClosed
        self.down.start_next_cycle()
        self.sent_continue = False
        self.head_sample = b""
