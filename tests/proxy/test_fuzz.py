"""Property-based fuzzing of the three request models through the real server (hypothesis).

The property, for every generated body: the answer is not 5xx, it comes back (no hang), the store
gains exactly one whole record (an ok call with consistent token lists, or an error call with
none), and a good request still gets 200 afterwards. Deterministic (derandomized) and bounded."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harnessrl.proxy.server import ProxyServer

SETTINGS = settings(max_examples=80, deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

scalars = st.none() | st.booleans() | st.integers(-10, 10**12) | st.floats(allow_nan=True, allow_infinity=True) | \
    st.text(max_size=20)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) |
                           st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=12)
texts = st.text(max_size=40)


def maybe(value_strategy):
    return value_strategy | json_values


def block(types: list[str]):
    kind = st.sampled_from(types) | st.text(max_size=10) | json_values
    return st.fixed_dictionaries({"type": kind}, optional={
        "text": maybe(texts), "id": maybe(texts), "name": maybe(texts), "input": json_values,
        "tool_use_id": maybe(texts), "content": maybe(texts), "thinking": maybe(texts), "signature": maybe(texts),
        "image_url": json_values, "source": json_values, "is_error": maybe(st.booleans()),
        "call_id": maybe(texts), "arguments": maybe(texts), "output": maybe(texts), "role": maybe(texts)}) | json_values


def message(roles: list[str], types: list[str]):
    return st.fixed_dictionaries({"role": st.sampled_from(roles) | json_values,
                                  "content": texts | st.lists(block(types), max_size=3) | json_values},
                                 optional={"tool_calls": json_values, "tool_call_id": maybe(texts),
                                           "name": maybe(texts), "reasoning_content": maybe(texts)})


def tool():
    schema = st.just({"type": "object", "properties": {"a": {"type": "string"}}}) | json_values
    return st.fixed_dictionaries({"name": maybe(texts)}, optional={
        "type": st.sampled_from(["function", "custom", "web_search"]) | json_values, "input_schema": schema,
        "parameters": schema, "description": maybe(texts),
        "function": st.fixed_dictionaries({"name": maybe(texts)}, optional={"parameters": schema})}) | json_values


common = {"model": maybe(texts), "stream": maybe(st.booleans()), "temperature": maybe(st.floats(-1, 3)),
          "top_p": maybe(st.floats(-1, 2)), "tools": st.lists(tool(), max_size=2) | json_values}
ANTHROPIC = st.fixed_dictionaries(
    {"messages": st.lists(message(["user", "assistant", "system"],
                                  ["text", "image", "tool_use", "tool_result", "thinking", "redacted_thinking"]),
                          max_size=4) | json_values},
    optional={**common, "max_tokens": maybe(st.integers(-2, 64)), "system": texts | st.lists(block(["text"]), max_size=2),
              "stop_sequences": maybe(st.lists(texts, max_size=2))})
CHAT = st.fixed_dictionaries(
    {"messages": st.lists(message(["system", "developer", "user", "assistant", "tool", "function"],
                                  ["text", "image_url", "input_audio", "refusal"]), max_size=4) | json_values},
    optional={**common, "max_tokens": maybe(st.integers(-2, 64)), "n": maybe(st.integers(0, 3)),
              "stop": maybe(texts | st.lists(texts, max_size=2)), "stream_options": json_values})
RESPONSES = st.fixed_dictionaries(
    {"input": texts | st.lists(block(["message", "function_call", "function_call_output", "reasoning",
                                      "custom_tool_call", "input_text", "input_image", "web_search_call"]),
                               max_size=4) | json_values},
    optional={**common, "max_output_tokens": maybe(st.integers(-2, 64)), "instructions": maybe(texts),
              "previous_response_id": maybe(texts)})
GOOD = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}


@pytest.fixture(scope="module")
def served(tmp_path_factory, renderer):
    from harnessrl.store import RunStore

    from .fakes import TextScriptEngine

    store = RunStore(tmp_path_factory.mktemp("fuzz"))
    engine = TextScriptEngine(renderer.encode, renderer.eot_id, max_model_len=4096)
    server = ProxyServer(engine, store, renderer, max_body_bytes=256 * 1024).start()
    with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=60) as client:
        yield client, store
    server.stop()
    store.close()


def check(served, path: str, body: bytes) -> None:
    client, store = served
    before = store.count_calls()
    r = client.post(path, content=body, headers={"content-type": "application/json"})
    assert r.status_code < 500, r.text[:500]
    assert 200 <= r.status_code < 300 or r.status_code in (400, 413), (r.status_code, r.text[:300])
    calls = store.list_calls(["adhoc"], include_raw=True)[before:]
    assert len(calls) == 1  # exactly one whole record per call
    (call,) = calls
    if call.status == "ok":
        assert r.status_code == 200 and call.sampled_ids and len(call.logprobs) == len(call.sampled_ids)
        assert len(call.prompt_provenance) == len(call.prompt_ids) > 0
    else:
        assert r.status_code >= 400 and call.prompt_ids == [] and call.sampled_ids == [] and call.meta["error"]
    good = client.post("/v1/messages", json=GOOD)
    assert good.status_code == 200 and good.json()["content"][0]["type"] == "text"


def encode(body) -> bytes:
    return json.dumps(body, allow_nan=True).encode()


@SETTINGS
@given(body=ANTHROPIC)
def test_fuzz_anthropic_messages(served, body):
    check(served, "/v1/messages", encode(body))


@SETTINGS
@given(body=CHAT)
def test_fuzz_openai_chat(served, body):
    check(served, "/v1/chat/completions", encode(body))


@SETTINGS
@given(body=RESPONSES)
def test_fuzz_openai_responses(served, body):
    check(served, "/v1/responses", encode(body))


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=st.binary(max_size=300) | json_values.map(encode), path=st.sampled_from(
    ["/v1/messages", "/v1/chat/completions", "/v1/responses"]))
def test_fuzz_raw_bodies(served, body, path):
    check(served, path, body)


def test_fuzz_reached_both_outcomes(served):
    """The generators reach past validation: some fuzzed calls were served, some refused."""
    _, store = served
    kinds: dict[str, set[str]] = {}
    for c in store.list_call_summaries(["adhoc"]):
        kinds.setdefault(c["protocol"], set()).add(c["status"])
    assert all(kinds.get(p) == {"ok", "error"} for p in ("anthropic.messages", "openai.chat", "openai.responses")), kinds
