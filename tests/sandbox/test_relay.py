"""The keyed HTTP relay (sandbox/relay.py) in front of a real proxy, without bubblewrap.

The relay listens on a plain loopback socket here; tests/sandbox/test_bwrap_isolation.py runs
the same checks from inside a real bwrap sandbox.
"""

from __future__ import annotations

import http.client
import json
import re
import socket

import pytest

from harnessrl.proxy.server import ProxyServer
from harnessrl.sandbox.base import ProxyEndpoint
from harnessrl.sandbox.netbridge import ProxyBridge
from harnessrl.store import RunStore
from tests.proxy.fakes import TextScriptEngine

CHAT = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="module")
def renderer():
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.render.renderer import Renderer

    return Renderer.from_pretrained(smollm2_tokenizer_dir())


@pytest.fixture
def rig(tmp_path, renderer):
    store = RunStore(tmp_path / "run")
    server = ProxyServer(TextScriptEngine(renderer.encode, renderer.eot_id), store, renderer).start()
    own, other = server.register_rollout("own"), server.register_rollout("other")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    bridge = ProxyBridge(listener, ProxyEndpoint(port=server.port, key=own))
    try:
        yield {"port": listener.getsockname()[1], "own": own, "other": other, "store": store}
    finally:
        bridge.close()
        server.stop()
        store.close()


def _post(conn: http.client.HTTPConnection, path: str, body: dict, headers: dict | None = None):
    conn.request("POST", path, body=json.dumps(body), headers={"content-type": "application/json", **(headers or {})})
    r = conn.getresponse()
    return r.status, r.read()


def test_only_the_own_key_passes_on_one_keep_alive_connection(rig):
    conn = http.client.HTTPConnection("127.0.0.1", rig["port"], timeout=30)
    own, other = rig["own"], rig["other"]
    status, body = _post(conn, f"/r/{own}/v1/chat/completions", CHAT)
    assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] == "ok"
    status, body = _post(conn, "/v1/chat/completions", CHAT)  # unkeyed: the adhoc rollout
    assert status == 403
    err = json.loads(body)["error"]
    assert err["code"] == "forbidden" and err["type"] == "invalid_request_error" and "/r/" in err["message"]
    status, body = _post(conn, f"/r/{other}/v1/messages", CHAT, {"anthropic-version": "2023-06-01"})
    assert status == 403 and json.loads(body)["error"]["type"] == "permission_error"
    for path in ("/admin/rollouts", f"/r/{own}", f"/x/r/{own}/v1/chat/completions",
                 f"http://127.0.0.1/r/{own}/v1/chat/completions"):
        assert _post(conn, path, CHAT)[0] == 403, path
    conn.request("GET", "/health")
    r = conn.getresponse()
    assert r.status == 403 and r.read()
    status, _ = _post(conn, f"/r/{own}/v1/chat/completions", CHAT)  # the connection still serves
    assert status == 200
    conn.close()
    store = rig["store"]
    assert store.count_calls("own") == 2
    assert store.count_calls("other") == 0 and store.count_calls("adhoc") == 0


def _request(path: str, body: bytes, chunked: bool = False) -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    if not chunked:
        return (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    half = len(body) // 2
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (body[:half], body[half:]))
    return (head + "Transfer-Encoding: chunked\r\n\r\n").encode() + chunks + b"0\r\n\r\n"


def _read_responses(sock: socket.socket, n: int) -> list[int]:
    """Statuses of n Content-Length framed responses read off a raw socket."""
    data, out = b"", []
    while len(out) < n:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if sep:
            length = int(re.search(rb"(?im)^content-length: *(\d+)", head).group(1))
            if len(rest) >= length:
                out.append(int(head.split()[1]))
                data = rest[length:]
                continue
        chunk = sock.recv(65536)
        assert chunk, f"connection closed after {out}"
        data += chunk
    return out


def test_pipelined_and_chunked_requests_are_each_checked(rig):
    own, other = rig["own"], rig["other"]
    body = json.dumps(CHAT).encode()
    # a request for another key hidden as the "body" of an allowed request stays a body, and
    # pipelined requests after an allowed one are each checked
    smuggled = _request(f"/r/{other}/v1/chat/completions", body)
    wire = (_request(f"/r/{own}/v1/chat/completions", body, chunked=True)
            + _request(f"/r/{other}/v1/chat/completions", body, chunked=True)
            + _request(f"/r/{own}/v1/chat/completions", smuggled)
            + _request("/v1/chat/completions", body)
            + _request(f"/r/{own}/v1/chat/completions", body))
    with socket.create_connection(("127.0.0.1", rig["port"]), timeout=30) as s:
        s.sendall(wire)
        statuses = _read_responses(s, 5)
    assert statuses[0] == 200 and statuses[1] == 403 and statuses[3] == 403 and statuses[4] == 200
    assert statuses[2] == 400  # the smuggled request is an invalid JSON body of the own key's route
    store = rig["store"]
    assert store.count_calls("other") == 0 and store.count_calls("adhoc") == 0


def test_malformed_http_gets_a_typed_400(rig):
    with socket.create_connection(("127.0.0.1", rig["port"]), timeout=30) as s:
        s.sendall(b"POST /r/x/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab")
        data = b""
        while chunk := s.recv(65536):  # the relay closes after a malformed request
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") and json.loads(body)["error"]["code"] == "bad_request"


def test_streaming_passes_through(rig):
    conn = http.client.HTTPConnection("127.0.0.1", rig["port"], timeout=30)
    status, body = _post(conn, f"/r/{rig['own']}/v1/messages", {**CHAT, "stream": True},
                         {"anthropic-version": "2023-06-01"})
    assert status == 200
    events = [ln for ln in body.decode().splitlines() if ln.startswith("event: ")]
    assert events[0] == "event: message_start" and events[-1] == "event: message_stop"
    status, body = _post(conn, f"/r/{rig['own']}/v1/chat/completions", {**CHAT, "stream": True})
    assert status == 200 and body.rstrip().endswith(b"data: [DONE]")
    conn.close()
    assert rig["store"].count_calls("own") == 2


def test_connection_close_and_http10_clients_get_their_answer(rig):
    """urllib sends `Connection: close`; the relay must answer before it closes."""
    import urllib.error
    import urllib.request

    url = f"http://127.0.0.1:{rig['port']}/r/{rig['own']}/v1/chat/completions"
    req = urllib.request.Request(url, json.dumps(CHAT).encode(), {"content-type": "application/json"})
    assert json.loads(urllib.request.urlopen(req, timeout=30).read())["choices"][0]["message"]["content"] == "ok"
    bad = urllib.request.Request(url.replace(rig["own"], rig["other"]), json.dumps(CHAT).encode(),
                                 {"content-type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(bad, timeout=30)
    assert e.value.code == 403 and json.loads(e.value.read())["error"]["code"] == "forbidden"
    body = json.dumps(CHAT).encode()
    with socket.create_connection(("127.0.0.1", rig["port"]), timeout=30) as s:
        s.sendall(_request(f"/r/{rig['own']}/v1/chat/completions", body).replace(b"HTTP/1.1", b"HTTP/1.0"))
        data = b""
        while chunk := s.recv(65536):  # the relay closes after an HTTP/1.0 answer
            data += chunk
    assert data.startswith(b"HTTP/1.1 200") and b'"content":"ok"' in data
    assert rig["store"].count_calls("own") == 2 and rig["store"].count_calls("other") == 0


@pytest.mark.parametrize("pad_bytes", [200 * 1024, 2 * 1024 * 1024])
def test_oversized_headers_get_a_typed_431_not_a_reset(rig, pad_bytes):
    """A client still writing a huge head reads the relay's 431 (issue 20): the relay answers,
    then reads and drops the rest instead of closing under it."""
    import threading

    head = (f"POST /r/{rig['own']}/v1/messages HTTP/1.1\r\nHost: x\r\nanthropic-version: 2023-06-01\r\n".encode()
            + b"x-pad: " + b"a" * pad_bytes + b"\r\nContent-Length: 2\r\n\r\n{}")
    with socket.create_connection(("127.0.0.1", rig["port"]), timeout=30) as s:
        def send() -> None:
            try:
                s.sendall(head)
            except OSError:
                pass

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        data = b""
        while chunk := s.recv(65536):  # the relay closes after answering
            data += chunk
        sender.join(30)
    head_line, _, body = data.partition(b"\r\n\r\n")
    assert head_line.startswith(b"HTTP/1.1 431"), data[:200]
    assert json.loads(body)["error"]["type"] == "request_too_large"
    assert rig["store"].count_calls() == 0


def test_deep_json_through_the_relay_is_a_typed_400_and_stored(rig):
    """Issue 20: deeply nested JSON in any field was a 500 and the call was lost."""
    conn = http.client.HTTPConnection("127.0.0.1", rig["port"], timeout=30)
    body = json.dumps(CHAT)[:-1] + ', "metadata": ' + "[" * 1000 + "]" * 1000 + "}"
    conn.request("POST", f"/r/{rig['own']}/v1/chat/completions", body=body,
                 headers={"content-type": "application/json"})
    r = conn.getresponse()
    err = json.loads(r.read())["error"]
    assert r.status == 400 and err["type"] == "invalid_request_error" and "nested" in err["message"]
    status, _ = _post(conn, f"/r/{rig['own']}/v1/chat/completions", CHAT)  # the connection still serves
    assert status == 200
    conn.close()
    calls = rig["store"].list_calls(["own"])
    assert [(c.status, c.meta.get("error_kind")) for c in calls] == [("error", "invalid_request"), ("ok", None)]
