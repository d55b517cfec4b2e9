"""The proxy against an adversarial policy (issue 20): deep JSON, large requests, oversized and
trickled headers, bodies over the limit sent whole, a bare admin token, undelivered answers.

Each test talks to a real proxy over loopback HTTP. None asserts on elapsed time: where a test
needs "while X is still in progress", X is held open by a gate the test releases itself."""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import urllib.error
import urllib.request
from pathlib import Path

import httpx
import pytest

from harnessrl.proxy.server import ProxyServer

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
MSGS = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
RESP = {"model": "m", "input": "hi"}
ROUTES = {"anthropic": ("/v1/messages", MSGS), "openai": ("/v1/chat/completions", CHAT),
          "responses": ("/v1/responses", RESP)}
ROOT = Path(__file__).resolve().parents[2]


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def body_with(good: dict, field: str, raw_value: str) -> bytes:
    """`good` as JSON with one more top-level field whose value is the raw JSON text given."""
    return json.dumps(good)[:-1].encode() + f', "{field}": {raw_value}}}'.encode()


def error_of(family: str, r: httpx.Response) -> dict:
    body = r.json()
    if family == "anthropic":
        assert body["type"] == "error" and set(body["error"]) == {"type", "message"}
        return body["error"]
    assert set(body["error"]) == {"message", "type", "param", "code"}
    return body["error"]


# -- 7: deeply nested JSON ------------------------------------------------------------------------


@pytest.mark.parametrize("family", ["anthropic", "openai", "responses"])
def test_deep_json_is_a_typed_400_and_the_refusal_is_stored(proxy, store, family):
    from harnessrl.proxy.jsonutil import MAX_JSON_DEPTH

    path, good = ROUTES[family]
    base = f"http://127.0.0.1:{proxy.port}"
    # the body object is level 1, so this field's value may nest MAX_JSON_DEPTH - 1 levels
    ok = httpx.post(base + path, content=body_with(good, "metadata", nested(MAX_JSON_DEPTH - 1)),
                    headers={"content-type": "application/json"})
    assert ok.status_code == 200
    for depth in (MAX_JSON_DEPTH, 1000, 5000):  # past the limit, in a field the proxy ignores
        r = httpx.post(base + path, content=body_with(good, "metadata", nested(depth)),
                       headers={"content-type": "application/json"})
        assert r.status_code == 400, r.text
        err = error_of(family, r)
        assert "nest" in err["message"] and str(MAX_JSON_DEPTH) in err["message"]
        assert err["type"] == "invalid_request_error"
    calls = store.list_calls(include_raw=True)
    assert [c.status for c in calls] == ["ok", "error", "error", "error"]
    for c in calls[1:]:
        assert c.meta["error_kind"] == "invalid_request"
        assert isinstance(c.request.get("_unparsed", c.request.get("_truncated")), str)  # raw text, not a tree
    assert httpx.post(base + path, json=good).status_code == 200  # and the server still serves


def test_deep_json_on_count_tokens_and_admin_is_a_typed_400(proxy):
    from harnessrl.proxy.jsonutil import MAX_JSON_DEPTH

    base = f"http://127.0.0.1:{proxy.port}"
    deep = body_with(MSGS, "metadata", nested(MAX_JSON_DEPTH + 1))
    r = httpx.post(base + "/v1/messages/count_tokens", content=deep)
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    r = httpx.post(base + "/admin/rollouts", content=body_with({"rollout_id": "x"}, "pad", nested(1000)),
                   headers={"Authorization": f"Bearer {proxy.admin_token}"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"


def test_the_store_never_fails_on_a_value_it_cannot_encode():
    from harnessrl.store.codec import pack_json, to_json, unpack_json

    deep: list = []
    for _ in range(5000):
        deep = [deep]
    assert "_unencodable" in unpack_json(pack_json({"a": deep}))
    assert "_unencodable" in json.loads(to_json({"big": 1 << 70, "deep": deep}))


# -- 6: large requests do not stall the proxy -----------------------------------------------------


class GatedRenderer:
    """The real renderer, except that rendering a text over `big` characters waits for `gate`
    (so a test can hold a big request in progress and look at the proxy meanwhile)."""

    def __init__(self, renderer, big: int = 1_000_000):
        self._r, self.big = renderer, big
        self.gate, self.entered = threading.Event(), threading.Event()

    def __getattr__(self, name):
        return getattr(self._r, name)

    def render_text(self, messages, tools=None, add_generation_prompt=True):
        text = self._r.render_text(messages, tools, add_generation_prompt)
        if len(text) > self.big:
            self.entered.set()
            self.gate.wait(60)
        return text


def big_msgs(mb: float = 1.5) -> dict:
    return {**MSGS, "messages": [{"role": "user", "content": "word " * int(mb * 1024 * 1024 / 5)}]}


def start_in_thread(url: str, body: dict) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def run() -> None:
        out["r"] = httpx.post(url, json=body, timeout=120)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


@pytest.mark.parametrize("route", ["/v1/messages/count_tokens", "/v1/messages"])
def test_health_answers_while_a_big_request_is_rendered(engine, store, renderer, route):
    gated = GatedRenderer(renderer)
    with ProxyServer(engine, store, gated, max_body_bytes=8 * 1024 * 1024) as server:
        engine.max_model_len = 1 << 22
        url = server.base_urls(server.register_rollout("big"))["anthropic"] + route
        t, out = start_in_thread(url, big_msgs())
        try:
            assert gated.entered.wait(60), "the big request never reached rendering"
            # the big request is held inside rendering now: the proxy must still answer others
            health = httpx.get(f"http://127.0.0.1:{server.port}/health", timeout=20)
            assert health.status_code == 200 and health.json()["ok"]
            assert "r" not in out  # structural: answered while the big request was in progress
        finally:
            gated.gate.set()
            t.join(60)
        assert out["r"].status_code == 200


def test_large_requests_are_bounded_per_key_and_overall(engine, store, renderer):
    gated = GatedRenderer(renderer)
    with ProxyServer(engine, store, gated, max_body_bytes=8 * 1024 * 1024, large_body_bytes=1024 * 1024,
                     max_large_inflight_per_key=1, max_large_inflight=2) as server:
        engine.max_model_len = 1 << 22
        urls = [server.base_urls(server.register_rollout(f"r{i}")) for i in range(3)]
        t, out = start_in_thread(urls[0]["anthropic"] + "/v1/messages", big_msgs())
        try:
            assert gated.entered.wait(60)
            # a second large request on the same key: 429 in the caller's protocol, and stored
            r = httpx.post(urls[0]["anthropic"] + "/v1/messages", json=big_msgs(), timeout=60)
            assert r.status_code == 429 and r.json()["error"]["type"] == "rate_limit_error"
            assert r.headers["retry-after"] == "1" and "large" in r.json()["error"]["message"]
            r = httpx.post(urls[0]["anthropic"] + "/v1/messages/count_tokens", json=big_msgs(), timeout=60)
            assert r.status_code == 429  # count_tokens counts too (nothing stored: it is no call)
            # small requests of other keys still pass
            assert httpx.post(urls[2]["anthropic"] + "/v1/messages", json=MSGS, timeout=60).status_code == 200
            # another key: one more large request fits the proxy-wide bound of 2 ...
            gated.entered.clear()
            t2, out2 = start_in_thread(urls[1]["openai"] + "/chat/completions", big_msgs())
            assert gated.entered.wait(60)
            # ... the next one does not: 503 (OpenAI) / 529 (Anthropic), stored as a refusal
            r = httpx.post(urls[2]["openai"] + "/chat/completions", json=big_msgs(), timeout=60)
            assert r.status_code == 503 and r.json()["error"]["code"] == "overloaded"
            r = httpx.post(urls[2]["anthropic"] + "/v1/messages", json=big_msgs(), timeout=60)
            assert r.status_code == 529 and r.json()["error"]["type"] == "overloaded_error"
        finally:
            gated.gate.set()
            t.join(60)
            if "t2" in locals():
                t2.join(60)
        assert out["r"].status_code == 200 and out2["r"].status_code == 200
        # once they are done, large requests pass again
        assert httpx.post(urls[2]["openai"] + "/chat/completions", json=big_msgs(), timeout=60).status_code == 200
    kinds = {r: [c.meta.get("error_kind") for c in store.list_calls([r])] for r in ("r0", "r1", "r2")}
    assert kinds == {"r0": [None, "rate_limited"], "r1": [None], "r2": [None, "overloaded", "overloaded", None]}


# -- 8(a): a body over the limit, sent whole before reading ---------------------------------------


def test_413_reaches_a_client_that_sends_the_whole_body_first(proxy):
    """urllib writes the whole body before it reads: the 413 must wait for the body, not reset it."""
    body = json.dumps({**MSGS, "pad": "x" * (6 * 1024 * 1024)}).encode()  # the fixture's limit is 2 MiB
    url = f"http://127.0.0.1:{proxy.port}/v1/messages"
    for _ in range(3):
        req = urllib.request.Request(url, data=body, headers={"content-type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as exc:
            urllib.request.urlopen(req, timeout=60)
        assert exc.value.code == 413
        assert json.loads(exc.value.read())["error"]["type"] == "request_too_large"
    kinds = [c.meta["error_kind"] for c in proxy.store.list_calls()]
    assert kinds == ["too_large"] * 3


# -- 8(b): request headers ----------------------------------------------------------------------


def read_answer(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data or len(data.partition(b"\r\n\r\n")[2]) < int(
            re.search(rb"(?im)^content-length: *(\d+)", data.partition(b"\r\n\r\n")[0]).group(1)):
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a full answer: {data[:200]!r}"
        data += chunk
    return data


@pytest.mark.parametrize("pad_bytes", [200 * 1024, 2 * 1024 * 1024])
def test_oversized_headers_are_a_typed_431(proxy, engine, pad_bytes):
    head = (b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            + b"x-pad: " + b"a" * pad_bytes + b"\r\ncontent-length: 2\r\n\r\n{}")
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as s:
        sender = threading.Thread(target=lambda: _send_quietly(s, head), daemon=True)
        sender.start()
        data = read_answer(s)
        sender.join(30)
    status_line, _, rest = data.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 431"), status_line
    body = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert body["type"] == "error" and body["error"]["type"] == "request_too_large"
    assert httpx.post(proxy.base_urls()["openai"] + "/chat/completions", json=CHAT).status_code == 200


def _send_quietly(sock: socket.socket, data: bytes) -> None:
    try:
        sock.sendall(data)
    except OSError:
        pass


def test_header_deadline_fires_while_header_bytes_trickle_in(engine, store, renderer, monkeypatch):
    """A client that keeps sending header bytes still gets its 408. The header timer forgives a
    late server (bytes waiting unread when it fires); a trickling client makes that look true at
    every firing, which is what the patched peek says here: the deadline must hold regardless."""
    from harnessrl.proxy import transport

    monkeypatch.setattr(transport, "bytes_waiting", lambda t: True)
    with ProxyServer(engine, store, renderer, header_timeout_s=0.2) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=60) as s:
            answered = threading.Event()
            sent = [0]

            def trickle() -> None:
                try:
                    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-slow: ")
                    while not answered.is_set() and sent[0] < 5_000:  # bounded: seconds at most
                        s.sendall(b"a")
                        sent[0] += 1
                        answered.wait(0.002)
                except OSError:
                    pass

            sender = threading.Thread(target=trickle, daemon=True)
            sender.start()
            data = read_answer(s)
            answered.set()
            sender.join(30)
        assert data.startswith(b"HTTP/1.1 408") and b"request_timeout" in data
        assert sent[0] < 5_000  # the answer came while the client was still trickling
        stats = server.guard.stats()
        assert stats["header_timeouts"] == 1 and stats["late_reads"] >= 1


# -- 8(d): the admin token needs the Bearer scheme ---------------------------------------------------


def test_admin_token_needs_the_bearer_scheme(proxy):
    admin = f"http://127.0.0.1:{proxy.port}/admin/rollouts"
    for sent in (proxy.admin_token, f"Basic {proxy.admin_token}", f"Bearer{proxy.admin_token}",
                 f"Bearer  {proxy.admin_token}", f"{proxy.admin_token} Bearer", f"Bearer {proxy.admin_token} x"):
        r = httpx.get(admin, headers={"Authorization": sent})
        assert r.status_code == 401, sent
        assert "Authorization: Bearer" in r.json()["error"]["message"]
    assert httpx.get(admin, headers={"Authorization": f"Bearer {proxy.admin_token}"}).status_code == 200


# -- 8(e): one body limit in code, CLI and docs ------------------------------------------------------


def test_body_limit_default_is_the_same_in_code_cli_and_docs():
    import inspect

    from harnessrl.app import serve as cli
    from harnessrl.proxy.server import DEFAULT_MAX_BODY_BYTES

    mib = DEFAULT_MAX_BODY_BYTES / (1024 * 1024)
    option = inspect.signature(cli.serve).parameters["max_body_mb"].default
    assert option.default == mib
    for doc in ("docs/proxy.md", "docs/security.md"):
        said = re.findall(r"`max_body_bytes`[^.]*?(\d+) MiB", (ROOT / doc).read_text())
        assert said and {float(x) for x in said} == {mib}, (doc, said)


# -- 8(f): calls whose answer was never delivered ---------------------------------------------------


def test_a_call_whose_answer_was_not_delivered_is_marked(engine, store, renderer):
    gate, entered = threading.Event(), threading.Event()
    original = engine.generate

    async def held(prompt_ids, params):
        entered.set()
        await asyncio.to_thread(gate.wait, 60)
        return await original(prompt_ids, params)

    engine.generate = held
    with ProxyServer(engine, store, renderer) as server:
        url = server.base_urls(server.register_rollout("gone"))["openai"] + "/chat/completions"
        body = json.dumps(CHAT).encode()
        with socket.create_connection(("127.0.0.1", server.port)) as s:
            s.sendall(b"POST " + url.split(str(server.port), 1)[1].encode() + b" HTTP/1.1\r\nhost: x\r\n"
                      b"content-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
            assert entered.wait(60)  # the call is with the engine: its body was read
        for _ in range(3000):  # until the proxy saw the client go (bounded)
            if not server.guard.stats()["open"]:
                break
            threading.Event().wait(0.01)
        gate.set()
        for _ in range(3000):  # until the call is stored (it is, before any answer is written)
            if store.count_calls("gone"):
                break
            threading.Event().wait(0.01)
        assert httpx.post(url, json=CHAT, timeout=30).status_code == 200  # delivered
    calls = store.list_calls(["gone"])
    assert [(c.status, c.delivered) for c in calls] == [("ok", False), ("ok", True)]
    summaries = store.list_call_summaries(["gone"])
    assert [s["delivered"] for s in summaries] == [0, 1]


def test_an_undelivered_completion_is_context_not_a_decision():
    from harnessrl.store import CallRecord, RolloutRecord
    from harnessrl.tree.filters import FilterConfig, plan_filters

    def call(cid: str, seq: int, delivered: bool) -> CallRecord:
        prompt = [1, 2, 3] + [7] * seq
        return CallRecord(cid, "r", seq, "openai.chat", prompt, [4 + seq, 9], [-0.1, -0.1], [-1] * len(prompt), 0,
                          1.0, 1.0, "stop", delivered=delivered)

    plan = plan_filters([call("a", 0, False), call("b", 1, True)],
                        [RolloutRecord("r", "t", "h", "g", "ok", 1.0)], FilterConfig())
    assert plan.trainable == {"a": False, "b": True}
    assert plan.counts["undelivered_calls"] == 1


def test_a_run_dir_from_before_the_delivered_column_still_reads(tmp_path):
    import sqlite3

    from harnessrl.store import RunStore
    from harnessrl.store.records import CallRecord

    with RunStore(tmp_path) as s:
        s.insert_call(CallRecord("c1", "r", 0, "openai.chat", [1], [2], [-0.5], [-1], 0, 1.0, 1.0, "stop"))
    with sqlite3.connect(tmp_path / "harnessrl.sqlite") as db:  # what an older harnessrl wrote
        db.execute("ALTER TABLE calls DROP COLUMN delivered")
    with RunStore(tmp_path) as s:
        (c,) = s.list_calls()
        assert c.delivered  # calls stored before the column: as they were read before (delivered)
