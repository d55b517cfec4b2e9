"""The connection guards under the app: framing errors in the protocol's shape, header timeouts,
a connection limit per client; the server keeps serving good requests through all of them."""

from __future__ import annotations

import json
import socket

import httpx

from harnessrl.proxy.server import ProxyServer

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def exchange(port: int, raw: bytes, timeout_s: float = 30) -> bytes:
    """Send raw bytes, read until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.settimeout(timeout_s)
        if raw:
            s.sendall(raw)
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return data


def body_of(response: bytes) -> dict:
    return json.loads(response.split(b"\r\n\r\n", 1)[1])


def test_framing_errors_get_the_protocol_error_shape(proxy):
    bad_chunk = (b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n"
                 b"zz-not-hex\r\n")
    r = exchange(proxy.port, bad_chunk)
    assert r.startswith(b"HTTP/1.1 400") and b"application/json" in r
    assert body_of(r)["type"] == "error" and body_of(r)["error"]["type"] == "invalid_request_error"
    r = exchange(proxy.port, b"POST /v1/chat/completions HTTP/1.1\r\nbad header line\r\n\r\n")
    assert r.startswith(b"HTTP/1.1 400") and body_of(r)["error"]["type"] == "invalid_request_error"
    assert "malformed HTTP request" in body_of(r)["error"]["message"]
    assert httpx.post(proxy.base_urls()["openai"] + "/chat/completions", json=CHAT).status_code == 200


def test_slow_headers_and_idle_connections_are_closed(engine, store, renderer):
    with ProxyServer(engine, store, renderer, header_timeout_s=0.5) as server:
        r = exchange(server.port, b"POST /v1/responses HTTP/1.1\r\nhost: x\r\n")  # headers never end
        assert r.startswith(b"HTTP/1.1 408") and body_of(r)["error"]["code"] == "request_timeout"
        assert exchange(server.port, b"").startswith(b"HTTP/1.1 408")  # connected, sent nothing
        with httpx.Client() as client:  # a kept-alive connection serves its requests regardless
            for _ in range(2):
                assert client.post(server.base_urls()["openai"] + "/chat/completions", json=CHAT).status_code == 200
        assert server.guard.timed_out == 2
    assert store.count_calls() == 2


def test_connection_limit_per_client(engine, store, renderer):
    with ProxyServer(engine, store, renderer, max_connections_per_client=4) as server:
        held = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(4)]
        try:
            r = exchange(server.port, b"")
            assert r.startswith(b"HTTP/1.1 503") and b"retry-after: 1" in r.lower()
            assert "too many open connections" in body_of(r)["error"]["message"]
        finally:
            for s in held:
                s.close()
        for _ in range(100):  # the server sees the closes asynchronously
            if not server.guard.open_by_client:
                break
            httpx.get(f"http://127.0.0.1:{server.port}/health")
        assert httpx.post(server.base_urls()["openai"] + "/chat/completions", json=CHAT).status_code == 200
        assert server.guard.refused >= 1
