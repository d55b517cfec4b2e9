"""The Gemini API against the real proxy over loopback HTTP, with request bodies in the shapes the
@google/genai SDK (gemini-cli's client) sends: `?alt=sse` streams, `x-goog-api-key`, functionCall
/ functionResponse turns with ids, `parametersJsonSchema` tools, systemInstruction and
generationConfig."""

from __future__ import annotations

import json
import re

import httpx
import pytest

from .helpers import assert_call_ok, assert_prefix_chain, tool_call_text

SHELL = {"functionDeclarations": [{
    "name": "run_shell_command", "description": "Run a shell command",
    "parametersJsonSchema": {"type": "object", "properties": {"command": {"type": "string"}},
                             "required": ["command"]}}]}
MODEL = "gemini-2.5-pro"


def _url(proxy, key: str | None, method: str, sse: bool = False) -> str:
    base = proxy.base_urls(key)["gemini"]
    return f"{base}/v1beta/models/{MODEL}:{method}" + ("?alt=sse" if sse else "")


def _events(text: str) -> list[dict]:
    """The `data:` events of an SSE body, as the genai SDK splits them."""
    return [json.loads(e.strip()[len("data:"):]) for e in text.replace("\r\n", "\n").split("\n\n")
            if e.strip().startswith("data:")]


def _model_turn(chunks: list[dict]) -> dict:
    """The model's content as gemini-cli keeps it in history: every streamed part, in order."""
    return {"role": "model", "parts": [p for c in chunks for p in c["candidates"][0]["content"]["parts"]]}


@pytest.mark.parametrize("stream", [False, True])
def test_function_call_turns_exact_ids(proxy, engine, store, stream):
    key = proxy.register_rollout("rollout-g")
    engine.replies.extend([tool_call_text(("run_shell_command", {"command": "ls"})), "Done: a.txt"])
    contents: list[dict] = [{"role": "user", "parts": [{"text": "List the files."}]}]
    body = {"contents": contents, "tools": [SHELL], "systemInstruction": {"parts": [{"text": "You are Gemini."}]},
            "generationConfig": {"temperature": 0.7, "topP": 0.9, "maxOutputTokens": 200,
                                 "thinkingConfig": {"includeThoughts": False}},
            "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}}}
    with httpx.Client(timeout=30) as http:
        for turn in range(2):
            method = "streamGenerateContent" if stream else "generateContent"
            r = http.post(_url(proxy, key, method, sse=stream), json=body,
                          headers={"x-goog-api-key": key})
            assert r.status_code == 200, r.text
            if stream:
                assert r.headers["content-type"].startswith("text/event-stream")
                chunks = _events(r.text)
                assert "finishReason" in chunks[-1]["candidates"][0] and "usageMetadata" in chunks[-1]
                assert all("finishReason" not in c["candidates"][0] for c in chunks[:-1])
            else:
                chunks = [r.json()]
            last = chunks[-1]
            assert last["candidates"][0]["finishReason"] == "STOP"
            assert last["usageMetadata"]["candidatesTokenCount"] >= 1
            model_turn = _model_turn(chunks)
            if turn == 0:
                calls = [p["functionCall"] for p in model_turn["parts"] if "functionCall" in p]
                assert [(c["name"], c["args"]) for c in calls] == [("run_shell_command", {"command": "ls"})]
                contents += [model_turn, {"role": "user", "parts": [{"functionResponse": {
                    "id": calls[0]["id"], "name": "run_shell_command", "response": {"output": "a.txt"}}}]}]
            else:
                assert model_turn["parts"] == [{"text": "Done: a.txt"}]
    records = store.list_calls(["rollout-g"], include_raw=True)
    assert [c.protocol for c in records] == ["gemini.generate_content"] * 2
    for c in records:
        assert_call_ok(c)
        assert c.temperature == 0.7 and c.top_p == 0.9
        assert c.meta["sampling"]["max_tokens"] == 200 and c.meta["stream"] is stream
    assert_prefix_chain(records)  # the reply's ids are the next prompt's, token for token
    assert "a.txt" in engine_prompt_text(proxy, records[1])


def engine_prompt_text(proxy, record) -> str:
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_tokenizer_dir()).decode(record.prompt_ids)


def test_query_key_selects_rollout_on_bare_route_and_adhoc(proxy, engine, store):
    key = proxy.register_rollout("rollout-q")
    root = proxy.base_urls(None)["gemini"]
    body = {"contents": [{"parts": [{"text": "hi"}]}]}  # role omitted: user
    with httpx.Client(timeout=30) as http:
        assert http.post(f"{root}/v1beta/models/{MODEL}:generateContent?key={key}", json=body).status_code == 200
        assert http.post(f"{root}/v1beta/models/{MODEL}:generateContent", json=body).status_code == 200
    assert len(store.list_calls(["rollout-q"])) == 1
    assert [c.rollout_id for c in store.list_calls(["adhoc"])] == ["adhoc"]


def test_count_tokens(proxy, store):
    key = proxy.register_rollout("rollout-c")
    with httpx.Client(timeout=30) as http:
        r = http.post(_url(proxy, key, "countTokens"), json={"contents": [{"role": "user", "parts": [{"text": "hi"}]}]})
        wrapped = http.post(_url(proxy, key, "countTokens"), json={"generateContentRequest": {
            "model": f"models/{MODEL}", "contents": [{"role": "user", "parts": [{"text": "hi"}]}]}})
    assert r.status_code == 200 and r.json()["totalTokens"] > 1
    assert wrapped.json() == r.json()
    assert store.list_calls(["rollout-c"]) == []


def test_openapi_types_thoughts_and_placeholders(proxy, engine, store):
    key = proxy.register_rollout("rollout-p")
    tool = {"functionDeclarations": [{"name": "read_file", "parameters": {
        "type": "OBJECT", "properties": {"path": {"type": "STRING"}}}}], "googleSearch": {}}
    body = {"contents": [
        {"role": "user", "parts": [{"text": "Look:"}, {"inlineData": {"mimeType": "image/png", "data": "AAAA"}}]},
        {"role": "model", "parts": [{"text": "thinking...", "thought": True}, {"text": "I see.",
                                                                             "thoughtSignature": "c2ln"}]},
        {"role": "user", "parts": [{"text": "Now?"}]}],
        "tools": [tool], "systemInstruction": "Be brief."}
    with httpx.Client(timeout=30) as http:
        r = http.post(_url(proxy, key, "generateContent"), json=body)
    assert r.status_code == 200, r.text
    rec = store.list_calls(["rollout-p"], include_raw=True)[0]
    assert {d["type"] for d in rec.meta["dropped"]} == {"inlineData", "googleSearch"}
    text = engine_prompt_text(proxy, rec)
    assert "[inlineData]" in text and "Be brief." in text and '"type": "string"' in text


@pytest.mark.parametrize("body, field", [
    ({"contents": [{"role": "user", "parts": [{"video": {}}]}]}, "contents.0.parts.0: unsupported part field 'video'"),
    ({"contents": [{"role": "user", "parts": [{"text": "a", "functionCall": {"name": "x"}}]}]}, "contents.0.parts.0"),
    ({"contents": [{"role": "user", "parts": [{"text": "a"}]}], "generationConfig": {"candidateCount": 2}},
     "generationConfig.candidateCount"),
    ({"contents": [{"role": "user", "parts": [{"text": "a"}]}], "generationConfig": {"temperature": "hot"}},
     "generationConfig.temperature"),
    ({"contents": "hi"}, "contents"),
])
def test_bad_requests_in_google_error_shape(proxy, store, body, field):
    key = proxy.register_rollout("rollout-b")
    with httpx.Client(timeout=30) as http:
        r = http.post(_url(proxy, key, "generateContent"), json=body)
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == 400 and err["status"] == "INVALID_ARGUMENT" and field in err["message"]
    assert set(err) == {"code", "message", "status"}


def test_stream_without_alt_sse_and_unknown_key_and_route(proxy, store):
    key = proxy.register_rollout("rollout-e")
    body = {"contents": [{"role": "user", "parts": [{"text": "a"}]}]}
    with httpx.Client(timeout=30) as http:
        no_sse = http.post(_url(proxy, key, "streamGenerateContent"), json=body)
        bad_key = http.post(_url(proxy, "nope", "generateContent"), json=body)
        unknown = http.post(f"{proxy.base_urls(key)['gemini']}/v1beta/models/{MODEL}:embedContent", json=body)
    assert no_sse.status_code == 400 and "alt=sse" in no_sse.json()["error"]["message"]
    assert bad_key.status_code == 401 and bad_key.json()["error"]["status"] == "UNAUTHENTICATED"
    assert unknown.status_code == 404 and unknown.json()["error"]["status"] == "NOT_FOUND"


def test_prompt_too_long_is_typed_and_recorded(proxy, engine, store):
    engine.max_model_len = 32
    key = proxy.register_rollout("rollout-t")
    body = {"contents": [{"role": "user", "parts": [{"text": "word " * 100}]}]}
    with httpx.Client(timeout=30) as http:
        r = http.post(_url(proxy, key, "streamGenerateContent", sse=True), json=body)
    assert r.status_code == 400
    assert "exceeds the maximum number of tokens allowed (32)" in r.json()["error"]["message"]
    [rec] = store.list_calls(["rollout-t"], include_raw=True)
    assert rec.status == "error" and rec.meta["error_kind"] == "too_long"


_EVENT = re.compile(r"^\s*data: (.*)(?:\n\n|\r\r|\r\n\r\n)")  # the parser of the genai versions gemini-cli bundles


def _bundled_sdk_events(raw: bytes) -> list[dict]:
    """What that parser yields from a stream body: each match from the buffer's start; a leftover
    that is not whitespace is its "Incomplete JSON segment" error; a bare JSON error object raises."""
    text = raw.decode()
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict) and "error" in whole:
        raise RuntimeError(f"ApiError {whole['error']['code']}: {whole['error']['status']}")
    out = []
    while (m := _EVENT.match(text)):
        out.append(json.loads(m.group(1)))
        text = text[m.end():]
    assert not text.strip(), f"Incomplete JSON segment at the end: {text[:80]!r}"
    return out


@pytest.fixture
def slow_proxy(engine, store, renderer):
    """A proxy whose engine takes longer than the keepalive interval: streams open with keepalives."""
    import asyncio

    from harnessrl.proxy.server import ProxyServer

    plain = engine.generate

    async def slow(ids, params):
        await asyncio.sleep(0.5)
        return await plain(ids, params)

    engine.generate = slow
    server = ProxyServer(engine, store, renderer, stream_keepalive_s=0.05).start()
    yield server
    server.stop()


def test_keepalive_stream_parses_with_the_bundled_sdk_rule(slow_proxy, engine, store):
    key = slow_proxy.register_rollout("rollout-k")
    engine.replies.append("slow hello")
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    with httpx.Client(timeout=30) as http:
        r = http.post(_url(slow_proxy, key, "streamGenerateContent", sse=True), json=body)
        engine.overloaded = True
        failed = http.post(_url(slow_proxy, key, "streamGenerateContent", sse=True), json=body)
    assert r.status_code == 200 and r.content.startswith(b"\n")  # keepalives went out first
    events = _bundled_sdk_events(r.content)
    assert events[-1]["candidates"][0]["content"]["parts"] == [{"text": "slow hello"}]
    assert failed.status_code == 200  # the status line went out with the first keepalive
    with pytest.raises(RuntimeError, match="ApiError 503: UNAVAILABLE"):
        _bundled_sdk_events(failed.content.strip())
    assert failed.content.startswith(b"\n")
