"""Schemathesis over the proxy's own OpenAPI document (GET /openapi.json), against the real
server with a scripted engine, on a rollout key's routes. The property, for every generated
request (valid and invalid, schemathesis's positive and negative modes): never a 5xx other than
the documented overload answer, every status documented for its route, every error body in that
route's protocol shape (Anthropic or OpenAI), the right content type; and afterwards no half
record in the store and a good request still served. Bounded: a few examples per operation,
derandomized."""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (content_type_conformance, response_schema_conformance,
                                               status_code_conformance)

from harnessrl.proxy.openapi import openapi_schema
from harnessrl.proxy.server import ProxyServer

# not_a_server_error, plus conformance to the document; the data-acceptance checks do not apply:
# the models are lax on purpose (pydantic coerces "true" to a bool, harnesses send odd but usable
# bodies), and a schema-valid body can still be refused by a documented 400 (wire.py rules).
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
SERVED_MODEL = "policy"
schema = schemathesis.openapi.from_dict(openapi_schema(SERVED_MODEL))


@pytest.fixture(scope="module")
def served(tmp_path_factory, renderer):
    from harnessrl.store import RunStore

    from .fakes import TextScriptEngine

    store = RunStore(tmp_path_factory.mktemp("openapi"))
    engine = TextScriptEngine(renderer.encode, renderer.eot_id, max_model_len=4096)
    server = ProxyServer(engine, store, renderer, max_body_bytes=256 * 1024, served_model=SERVED_MODEL).start()
    key = server.register_rollout("schemathesis")
    yield f"http://127.0.0.1:{server.port}", key, store
    server.stop()
    store.close()


def test_served_document_is_the_tested_one(served):
    root, _, _ = served
    assert httpx.get(root + "/openapi.json", timeout=30).json() == openapi_schema(SERVED_MODEL)


@schema.parametrize()
@settings(max_examples=6, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def test_proxy_conforms_to_its_openapi(case, served):
    root, key, _ = served
    case.call_and_validate(base_url=f"{root}/r/{key}", checks=CHECKS, timeout=60)


def test_no_half_record_and_still_serving(served):
    root, key, store = served
    calls = store.list_calls(["schemathesis"])
    assert calls, "the schemathesis run made no call"
    for c in calls:
        if c.status == "ok":
            assert c.sampled_ids and len(c.logprobs) == len(c.sampled_ids)
            assert len(c.prompt_provenance) == len(c.prompt_ids) > 0
        else:
            assert c.prompt_ids == [] and c.sampled_ids == [] and c.meta["error"]
    good = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    assert httpx.post(f"{root}/r/{key}/v1/messages", json=good, timeout=60).status_code == 200
