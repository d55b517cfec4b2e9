"""Every bad request gets the protocol's own error shape, is stored as an error call, and the
server keeps answering afterwards."""

from __future__ import annotations

import anthropic
import httpx
import openai
import pytest

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
MSGS = {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
RESP = {"model": "m", "input": "hi"}
ROUTES = {"anthropic": ("/v1/messages", MSGS), "openai": ("/v1/chat/completions", CHAT),
          "responses": ("/v1/responses", RESP)}


def is_anthropic_error(body: dict, kind: str) -> bool:
    return body["type"] == "error" and body["error"]["type"] == kind and body["error"]["message"]


def is_openai_error(body: dict, code: str | None = None) -> bool:
    err = body["error"]
    return set(err) == {"message", "type", "param", "code"} and err["message"] and err["code"] == code


@pytest.fixture
def base(proxy):
    return f"http://127.0.0.1:{proxy.port}"


def still_serves(base: str, engine) -> None:
    engine.replies.append("still here")
    r = httpx.post(base + "/v1/chat/completions", json=CHAT)
    assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == "still here"


@pytest.mark.parametrize("family", ["anthropic", "openai", "responses"])
def test_malformed_json_and_schema(base, engine, store, family):
    path, good = ROUTES[family]
    for body in (b"{not json", b"", b"[1, 2]"):
        r = httpx.post(base + path, content=body, headers={"content-type": "application/json"})
        assert r.status_code == 400
        if family == "anthropic":
            assert is_anthropic_error(r.json(), "invalid_request_error")
        else:
            assert is_openai_error(r.json())
    bad = {k: v for k, v in good.items() if k not in ("messages", "input")}
    r = httpx.post(base + path, json=bad)
    assert r.status_code == 400 and ("messages" in r.text or "input" in r.text)
    r = httpx.post(base + path, json={**good, "temperature": "hot"})
    assert r.status_code == 400
    errors = store.list_calls(include_raw=True)
    assert len(errors) == 5 and {c.status for c in errors} == {"error"}
    assert errors[0].request == {"_unparsed": "{not json"} and errors[0].meta["error"]
    still_serves(base, engine)


def test_bad_blocks_and_roles(base, engine):
    r = httpx.post(base + "/v1/messages", json={**MSGS, "messages": [{"role": "user", "content": [{"text": "no type"}]}]})
    assert r.status_code == 400 and "without a type" in r.json()["error"]["message"]
    r = httpx.post(base + "/v1/messages", json={**MSGS, "messages": [{"role": "robot", "content": "x"}]})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    r = httpx.post(base + "/v1/chat/completions", json={**CHAT, "n": 3})
    assert r.status_code == 400 and r.json()["error"]["param"] == "n"
    r = httpx.post(base + "/v1/responses", json={**RESP, "previous_response_id": "resp_1"})
    assert r.status_code == 400 and "previous_response_id" in r.json()["error"]["message"]
    r = httpx.post(base + "/v1/chat/completions", json={**CHAT, "max_tokens": 0})
    assert r.status_code == 400
    still_serves(base, engine)


def test_prompt_too_long(proxy, engine, store):
    engine.max_model_len = 64
    long = "word " * 200
    a = anthropic.Anthropic(base_url=proxy.base_urls()["anthropic"], api_key="x", max_retries=0)
    with pytest.raises(anthropic.BadRequestError) as exc:
        a.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": long}])
    assert exc.value.status_code == 400
    assert "prompt is too long:" in exc.value.message and "> 64 maximum" in exc.value.message
    o = openai.OpenAI(base_url=proxy.base_urls()["openai"], api_key="x", max_retries=0)
    with pytest.raises(openai.BadRequestError) as exc2:
        o.chat.completions.create(model="m", messages=[{"role": "user", "content": long}])
    assert exc2.value.code == "context_length_exceeded" and "maximum context length is 64" in exc2.value.message
    with pytest.raises(openai.BadRequestError) as exc3:
        o.responses.create(model="m", input=long)
    assert exc3.value.code == "context_length_exceeded"
    assert engine.seen == []  # nothing was sent to the engine, nothing truncated
    assert [c.status for c in store.list_calls()] == ["error"] * 3
    engine.max_model_len = 8192
    still_serves(f"http://127.0.0.1:{proxy.port}", engine)


def test_max_tokens_clamped_to_context(proxy, engine, store):
    engine.max_model_len = 60
    engine.replies.append("ok")
    r = httpx.post(proxy.base_urls()["openai"] + "/chat/completions", json={**CHAT, "max_tokens": 10_000})
    assert r.status_code == 200
    (call,) = store.list_calls()
    assert call.meta["sampling"]["max_tokens"] == 60 - len(call.prompt_ids)
    assert call.meta["sampling"]["requested_max_tokens"] == 10_000


def test_overload_status_and_sdk_retry(proxy, engine, store):
    engine.overloaded = True
    r = httpx.post(proxy.base_urls()["anthropic"] + "/v1/messages", json=MSGS)
    assert r.status_code == 529 and is_anthropic_error(r.json(), "overloaded_error")
    r = httpx.post(proxy.base_urls()["openai"] + "/chat/completions", json=CHAT)
    assert r.status_code == 503 and is_openai_error(r.json(), "overloaded")
    r = httpx.post(proxy.base_urls()["openai"] + "/responses", json=RESP)
    assert r.status_code == 503
    # the SDK retries a 529 and gets through once the engine has room
    calls_before = store.count_calls()

    engine.overloaded = False
    engine.overload_next = 1
    engine.replies.append("recovered")
    a = anthropic.Anthropic(base_url=proxy.base_urls()["anthropic"], api_key="x", max_retries=2)
    msg = a.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    assert msg.content[0].text == "recovered"
    statuses = [c.status for c in store.list_calls()][calls_before:]
    assert statuses == ["error", "ok"]


def test_unknown_key_is_401_in_protocol_shape(proxy, engine, store):
    root = f"http://127.0.0.1:{proxy.port}/r/not-a-key"
    r = httpx.post(root + "/v1/messages", json=MSGS)
    assert r.status_code == 401 and is_anthropic_error(r.json(), "authentication_error")
    r = httpx.post(root + "/v1/chat/completions", json=CHAT)
    assert r.status_code == 401 and is_openai_error(r.json(), "invalid_api_key")
    r = httpx.get(root + "/v1/models")
    assert r.status_code == 401
    key = proxy.register_rollout("closing")
    proxy.close_rollout(key)
    r = httpx.post(proxy.base_urls(key)["openai"] + "/chat/completions", json=CHAT)
    assert r.status_code == 401
    assert store.count_calls() == 0  # no rollout, nothing recorded under another rollout's id


def test_unknown_route_is_404(base, engine):
    r = httpx.post(base + "/v1/embeddings", json={"input": "x"})
    assert r.status_code == 404 and is_openai_error(r.json(), "not_found")
    r = httpx.post(base + "/v1/messages/batches", json={}, headers={"anthropic-version": "2023-06-01"})
    assert r.status_code == 404 and is_anthropic_error(r.json(), "not_found_error")
    r = httpx.get(base + "/v1/chat/completions")  # wrong method
    assert r.status_code == 405 and r.headers["allow"] == "POST" and is_openai_error(r.json(), "method_not_allowed")
    r = httpx.delete(base + "/v1/messages")
    assert r.status_code == 405 and is_anthropic_error(r.json(), "invalid_request_error")
    still_serves(base, engine)


def test_body_size_limit_is_413(proxy, base, engine):
    huge = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x" * (3 * 1024 * 1024)}]}
    r = httpx.post(base + "/v1/messages", json=huge)
    assert r.status_code == 413 and is_anthropic_error(r.json(), "request_too_large")

    def chunks():  # no content-length: the limit holds while streaming the body in
        for _ in range(40):
            yield b"x" * 100_000

    r = httpx.post(base + "/v1/chat/completions", content=chunks())
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
    assert [(c.status, c.meta["error_kind"]) for c in proxy.store.list_calls()] == [("error", "too_large")] * 2
    still_serves(base, engine)


def test_engine_crash_is_500_and_stored(proxy, engine, store):
    async def boom(prompt_ids, params):
        raise RuntimeError("kaboom")

    original = engine.generate
    engine.generate = boom
    r = httpx.post(proxy.base_urls()["openai"] + "/chat/completions", json=CHAT)
    assert r.status_code == 500 and "kaboom" in r.json()["error"]["message"]
    (call,) = store.list_calls()
    assert call.status == "error" and call.meta["error_kind"] == "internal"
    engine.generate = original
    still_serves(f"http://127.0.0.1:{proxy.port}", engine)
