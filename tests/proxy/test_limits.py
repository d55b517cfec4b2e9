"""Typed answers to what the text-only policy cannot honour, and the proxy's disk and body limits:
the error shape names the field, dropped inputs are recorded, quotas and timeouts answer typed."""

from __future__ import annotations

import socket

import httpx
import pytest

from harnessrl.proxy.calls import ERROR_REQUEST_LIMIT
from harnessrl.proxy.server import ProxyServer

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
MSGS = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
RESP = {"model": "m", "input": "hi"}
PNG = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}


def post(proxy, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"http://127.0.0.1:{proxy.port}{path}", json=body, timeout=30)


def test_images_become_placeholders_recorded_as_dropped(proxy, engine, store, renderer):
    user = [{"type": "text", "text": "look"}, {"type": "image", "source": PNG}]
    assert post(proxy, "/v1/messages", {**MSGS, "messages": [{"role": "user", "content": user}]}).status_code == 200
    parts = [{"type": "text", "text": "look"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,x"}}]
    assert post(proxy, "/v1/chat/completions", {**CHAT, "messages": [{"role": "user", "content": parts}]}).status_code == 200
    items = [{"role": "user", "content": [{"type": "input_text", "text": "look"},
                                          {"type": "input_image", "image_url": "data:image/png;base64,x"}]}]
    assert post(proxy, "/v1/responses", {**RESP, "input": items}).status_code == 200
    calls = store.list_calls(include_raw=True)
    assert [c.status for c in calls] == ["ok"] * 3
    assert [c.meta["dropped"][0]["field"] for c in calls] == ["messages.0.content.1", "messages.0.content.1",
                                                             "input.0.content.1"]
    assert [c.meta["dropped"][0]["type"] for c in calls] == ["image", "image_url", "input_image"]
    for c in calls:  # token truth: the placeholder is what the model saw
        assert f"[{c.meta['dropped'][0]['type']}]" in renderer.tokenizer.decode(c.prompt_ids)


@pytest.mark.parametrize("path,body,field", [
    ("/v1/messages", {**MSGS, "messages": [{"role": "user", "content": [{"type": "hologram", "x": 1}]}]},
     "messages.0.content.0.type"),
    ("/v1/messages", {**MSGS, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ls", "input": "{\"a\": 1}"}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]}]},
     "messages.1.content.0.input"),
    ("/v1/messages", {**MSGS, "tools": [{"name": "ls", "input_schema": "a string"}]}, "tools.0.input_schema"),
    ("/v1/messages", {**MSGS, "tools": [{"name": "ls", "input_schema": {"type": "array"}}]}, "tools.0.input_schema"),
    ("/v1/chat/completions", {**CHAT, "messages": [{"role": "user", "content": [{"type": "video", "v": 1}]}]},
     "messages.0.content.0.type"),
    ("/v1/chat/completions", {**CHAT, "tools": [{"type": "function", "function": {"name": "f", "parameters": [1]}}]},
     "tools.0.function.parameters"),
    ("/v1/responses", {**RESP, "input": [{"role": "user", "content": [{"type": "input_video"}]}]},
     "input.0.content.0.type"),
    ("/v1/responses", {**RESP, "tools": [{"type": "function", "name": "f", "parameters": "x"}]}, "tools.0.parameters"),
])
def test_what_the_policy_cannot_honour_is_a_400_naming_the_field(proxy, engine, store, path, body, field):
    r = post(proxy, path, body)
    assert r.status_code == 400
    err = r.json()["error"]
    assert field in err["message"]
    if path != "/v1/messages":
        assert err["param"] == field
    (call,) = store.list_calls()
    assert call.status == "error" and engine.seen == []


def test_count_tokens_refuses_what_messages_refuses(proxy, engine, store):
    bad = {**MSGS, "messages": [{"role": "user", "content": [{"type": "hologram"}]}]}
    r = post(proxy, "/v1/messages/count_tokens", bad)
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    huge = {**MSGS, "metadata": {"pad": "x" * (3 * 1024 * 1024)}}  # counted toward the limit wherever it sits
    r = post(proxy, "/v1/messages/count_tokens", huge)
    assert r.status_code == 413 and r.json()["error"]["type"] == "request_too_large"
    assert store.count_calls() == 0


def test_models_route_knows_only_the_served_model(proxy):
    base = f"http://127.0.0.1:{proxy.port}"
    assert httpx.get(f"{base}/v1/models/{proxy.served_model}").json()["id"] == proxy.served_model
    r = httpx.get(f"{base}/v1/models/..%2F..%2Fetc%2Fpasswd")
    assert r.status_code == 404 and r.json()["error"]["param"] == "model"


def test_admin_auth_messages(proxy):
    admin = f"http://127.0.0.1:{proxy.port}/admin/rollouts"
    r = httpx.post(admin, json={"rollout_id": "x"})
    assert r.status_code == 401 and "Authorization: Bearer" in r.json()["error"]["message"]
    r = httpx.get(admin, headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401 and "wrong admin token" in r.json()["error"]["message"]
    assert "rollout key" not in r.json()["error"]["message"]
    r = httpx.put(admin, headers={"Authorization": f"Bearer {proxy.admin_token}"})
    assert r.status_code == 405 and set(r.headers["allow"].split(", ")) >= {"GET", "POST"}


def test_error_rows_are_capped(proxy, store):
    big = {**CHAT, "temperature": "hot", "pad": "y" * (ERROR_REQUEST_LIMIT * 4)}
    r = post(proxy, "/v1/chat/completions", big)
    assert r.status_code == 400
    (call,) = store.list_calls(include_raw=True)
    assert call.request["_bytes"] > ERROR_REQUEST_LIMIT * 4
    assert len(call.request["_truncated"]) == ERROR_REQUEST_LIMIT


def test_rollout_quota_is_a_typed_413_recorded_once(engine, store, renderer):
    with ProxyServer(engine, store, renderer, rollout_quota=20_000) as server:
        key = server.register_rollout("greedy")
        url = server.base_urls(key)["openai"] + "/chat/completions"
        pad = {**CHAT, "messages": [{"role": "user", "content": "z" * 6000}]}
        statuses = [httpx.post(url, json=pad, timeout=30).status_code for _ in range(8)]
        assert statuses[:3] == [200, 200, 200] and statuses[-1] == 413
        r = httpx.post(url, json=CHAT, timeout=30)
        assert r.status_code == 413 and r.json()["error"]["code"] == "store_quota_exceeded"
        other = server.base_urls(server.register_rollout("modest"))["openai"] + "/chat/completions"
        assert httpx.post(other, json=CHAT, timeout=30).status_code == 200  # the quota is per rollout
    calls = store.list_calls(["greedy"])
    assert [c.meta.get("error_kind") for c in calls if c.status == "error"] == ["quota"]  # recorded once


def test_rollout_quota_survives_a_restart_and_a_new_key(engine, tmp_path, renderer):
    """The quota belongs to the rollout and lives in the store: a proxy restarted on the same run
    directory, and a second key of the same rollout, do not get a fresh one."""
    from harnessrl.store import RunStore

    pad = {**CHAT, "messages": [{"role": "user", "content": "z" * 6000}]}
    with RunStore(tmp_path / "run") as store, ProxyServer(engine, store, renderer, rollout_quota=15_000) as server:
        url = server.base_urls(server.register_rollout("greedy"))["openai"] + "/chat/completions"
        assert [httpx.post(url, json=pad, timeout=30).status_code for _ in range(2)] == [200, 200]
        spent = store.quota_usage("greedy")[0]
        assert 10_000 < spent < 15_000  # charged per call, as meta["quota_bytes"]
        # a second key of the same rollout shares what the first one spent
        url2 = server.base_urls(server.register_rollout("greedy"))["openai"] + "/chat/completions"
        assert [httpx.post(url2, json=pad, timeout=30).status_code for _ in range(2)] == [200, 413]
    with RunStore(tmp_path / "run") as store:  # a restart: a new store connection and a new proxy
        assert store.quota_usage("greedy") == (store.quota_usage("greedy")[0], 1)
        with ProxyServer(engine, store, renderer, rollout_quota=15_000) as server:
            url = server.base_urls(server.register_rollout("greedy"))["openai"] + "/chat/completions"
            r = httpx.post(url, json=CHAT, timeout=30)
            assert r.status_code == 413 and r.json()["error"]["code"] == "store_quota_exceeded"
            other = server.base_urls(server.register_rollout("fresh"))["openai"] + "/chat/completions"
            assert httpx.post(other, json=pad, timeout=30).status_code == 200
        calls = store.list_calls(["greedy"])
        assert [c.status for c in calls] == ["ok", "ok", "ok", "error"]  # the refusal after restart: not recorded
        assert [c.seq for c in calls] == [0, 1, 2, 3]


def test_slow_body_gets_408_and_the_connection_is_closed(engine, store, renderer):
    with ProxyServer(engine, store, renderer, body_timeout_s=0.5) as server:
        with socket.create_connection(("127.0.0.1", server.port)) as s:
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                      b"content-length: 1000\r\n\r\n{\"model\":")
            s.settimeout(30)
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        assert data.startswith(b"HTTP/1.1 408") and b"request_timeout" in data
        assert httpx.post(server.base_urls()["openai"] + "/chat/completions", json=CHAT).status_code == 200
    assert [c.meta.get("error_kind") for c in store.list_calls()] == ["timeout", None]


def test_per_key_inflight_limit_is_a_429_with_retry_after(engine, store, renderer):
    import asyncio

    original = engine.generate

    async def slow(prompt_ids, params):
        await asyncio.sleep(0.3)
        return await original(prompt_ids, params)

    engine.generate = slow
    with ProxyServer(engine, store, renderer, max_inflight_per_key=2) as server:
        url = server.base_urls(server.register_rollout("busy"))["openai"] + "/chat/completions"

        async def main() -> list[httpx.Response]:
            async with httpx.AsyncClient(timeout=30) as c:
                return await asyncio.gather(*(c.post(url, json=CHAT) for _ in range(5)))

        rs = asyncio.run(main())
    codes = sorted(r.status_code for r in rs)
    assert codes == [200, 200, 429, 429, 429]
    limited = next(r for r in rs if r.status_code == 429)
    assert limited.headers["retry-after"] == "1" and limited.json()["error"]["type"] == "rate_limit_error"
    assert store.count_calls() == 2  # backpressure is not recorded


def test_closing_a_key_frees_its_state(proxy, engine, store):
    keys = [proxy.register_rollout(f"r{i}") for i in range(5)]
    for k in keys:
        assert httpx.post(proxy.base_urls(k)["openai"] + "/chat/completions", json=CHAT).status_code == 200
    assert len(store._prefix._bases) == 5
    for k in keys:
        proxy.close_rollout(k)
    assert len(proxy.registry) == 0 and len(store._prefix._bases) == 0
    assert httpx.get(f"http://127.0.0.1:{proxy.port}/health").json()["open_keys"] == 0


def test_adhoc_history_is_bounded(proxy, monkeypatch):
    from harnessrl.proxy import rollouts

    monkeypatch.setattr(rollouts, "ADHOC_MAX_TURNS", 3)
    url = proxy.base_urls()["openai"] + "/chat/completions"
    for i in range(7):
        body = {**CHAT, "messages": [{"role": "user", "content": f"unrelated {i}"}]}
        assert httpx.post(url, json=body).status_code == 200
        assert len(proxy.registry.adhoc().conversation.turns) <= 3


@pytest.mark.parametrize("path,body", [
    ("/v1/messages", {**MSGS, "messages": [{"role": "user", "content": [{"type": ["text"]}]}]}),
    ("/v1/chat/completions", {**CHAT, "messages": [{"role": "user", "content": [{"type": {"a": 1}}]}]}),
    ("/v1/chat/completions", {**CHAT, "tools": [{"type": ["function"], "function": {"name": "f"}}]}),
    ("/v1/responses", {**RESP, "input": [{"type": ["message"], "role": "user", "content": "x"}]}),
])
def test_a_type_that_is_not_a_string_is_a_400(proxy, path, body):  # found by test_fuzz.py (was a 500)
    r = post(proxy, path, body)
    assert r.status_code == 400 and "unsupported content type" in r.text


def test_call_budget_is_a_typed_400_recorded_once(engine, store, renderer):
    """A key registered with max_calls (a harness with no turn limit of its own: Codex, OpenClaw)
    gets that many model calls; the next one is a typed 400 in the caller's protocol, recorded once
    (the runner reads it as the policy's end of the rollout); later ones are answered, not recorded."""
    from harnessrl.rollout.proxy_link import RemoteProxy

    with ProxyServer(engine, store, renderer) as server:
        url = server.base_urls(server.register_rollout("looping", max_calls=2))["openai"] + "/chat/completions"
        assert [httpx.post(url, json=CHAT, timeout=30).status_code for _ in range(2)] == [200, 200]
        for _ in range(2):
            r = httpx.post(url, json=CHAT, timeout=30)
            assert r.status_code == 400 and r.json()["error"]["code"] == "call_budget_exceeded"
        anth = server.base_urls(server.register_rollout("claude", max_calls=1))["anthropic"] + "/v1/messages"
        body = {**CHAT, "max_tokens": 8}
        assert httpx.post(anth, json=body, timeout=30).status_code == 200
        r = httpx.post(anth, json=body, timeout=30)
        assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
        # the same budget over the admin API (a runner in another process)
        remote = RemoteProxy(f"http://127.0.0.1:{server.port}", server.admin_token)
        url3 = server.base_urls(remote.register("remote", max_calls=1))["openai"] + "/chat/completions"
        assert [httpx.post(url3, json=CHAT, timeout=30).status_code for _ in range(2)] == [200, 400]
        bad = httpx.post(f"http://127.0.0.1:{server.port}/admin/rollouts", json={"rollout_id": "x", "max_calls": 0},
                         headers={"Authorization": f"Bearer {server.admin_token}"})
        assert bad.status_code == 400 and bad.json()["error"]["param"] == "max_calls"
    calls = store.list_calls(["looping"])
    assert [c.status for c in calls] == ["ok", "ok", "error"] and calls[-1].meta["error_kind"] == "call_budget"
