"""Serving policy (proxy/serving.py): default | force per knob with sent and used values recorded,
and stop strings of any length honoured exactly (trained ids end where the stop matched)."""

from __future__ import annotations

import httpx
import pytest

from harnessrl.proxy.server import ProxyServer
from harnessrl.proxy.serving import check_forced, resolve, stop_cut

from .fakes import TextScriptEngine


@pytest.fixture
def serve(store, renderer):
    servers = []

    def start(replies, **kw):
        engine = TextScriptEngine(renderer.encode, renderer.eot_id, replies)
        server = ProxyServer(engine, store, renderer, **kw).start()
        servers.append(server)
        key = server.register_rollout("r0")
        return engine, f"{server.base_urls(key)['openai']}/chat/completions"

    yield start
    for s in servers:
        s.stop()


def chat(url, **body):
    r = httpx.post(url, json={"model": "m", "messages": [{"role": "user", "content": "hi"}], **body}, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def test_sent_temperature_is_used_by_default_and_recorded(serve, store):
    engine, url = serve(["a"], default_temperature=0.7)
    chat(url, temperature=0.0)
    assert engine.seen[0][1].temperature == 0.0
    call = store.list_calls(["r0"])[0]
    assert call.temperature == 0.0 and call.meta["sampling"]["sent"]["temperature"] == 0.0
    assert call.meta["sampling"]["forced"] == []


def test_forced_temperature_overrides_the_harness_and_records_both(serve, store):
    engine, url = serve(["a", "b"], default_temperature=0.7, default_top_p=0.9, force=("temperature", "top_p"))
    chat(url, temperature=0.0, top_p=0.5)  # aider's greedy request
    chat(url)  # a harness that sends nothing: filled, not overridden
    (p0, p1) = [params for _, params in engine.seen]
    assert (p0.temperature, p0.top_p) == (0.7, 0.9) and (p1.temperature, p1.top_p) == (0.7, 0.9)
    c0, c1 = store.list_calls(["r0"])
    assert (c0.temperature, c0.top_p) == (0.7, 0.9)  # used: what the loss divides by
    assert c0.meta["sampling"]["sent"] == {"temperature": 0.0, "top_p": 0.5, "max_tokens": None}
    assert c0.meta["sampling"]["forced"] == ["temperature", "top_p"]
    assert c1.meta["sampling"]["forced"] == [] and c1.meta["sampling"]["sent"]["temperature"] is None


def test_forced_max_tokens_replaces_the_request_and_the_cap_still_bounds(serve, store):
    engine, url = serve(["a"], default_max_tokens=64, max_tokens_cap=48, force=("max_tokens",))
    chat(url, max_tokens=4000)
    assert engine.seen[0][1].max_tokens == 48
    assert store.list_calls(["r0"])[0].meta["sampling"]["forced"] == ["max_tokens"]


def test_unknown_forced_knob_is_refused():
    with pytest.raises(ValueError, match="temperature, top_p, max_tokens"):
        check_forced(["seed"])
    assert resolve({"temperature": 0.0, "top_p": None, "max_tokens": 10}, {"temperature": 1.0, "top_p": 1.0,
                   "max_tokens": 5}, (), 8).max_tokens == 8


def test_multi_token_stop_string_cuts_ids_logprobs_and_text(serve, store, renderer):
    text = "Thought: run it\n<code>\nprint(1)\n</code>\nObservation: 42"
    assert len(renderer.encode("</code>")) > 1 and len(renderer.encode("Observation:")) > 1
    _, url = serve([text])
    body = chat(url, stop=["Observation:", "</code>"])
    assert body["choices"][0]["message"]["content"] == "Thought: run it\n<code>\nprint(1)"  # the stop is not in it
    assert body["choices"][0]["finish_reason"] == "stop"
    call = store.list_calls(["r0"])[0]
    full = list(renderer.encode(text))
    k = len(call.sampled_ids)
    assert call.sampled_ids == full[:k] and len(call.logprobs) == k  # a prefix of what the engine sampled
    assert "</code>" in renderer.decode(call.sampled_ids)
    assert "</code>" not in renderer.decode(call.sampled_ids[:-1])  # it ends with the token that completed it
    assert call.finish_reason == "stop"


def test_stop_string_absent_leaves_the_completion_whole(serve, store, renderer):
    _, url = serve(["no stop here"])
    body = chat(url, stop=["</code>"])
    assert body["choices"][0]["message"]["content"] == "no stop here"
    assert store.list_calls(["r0"])[0].sampled_ids == list(renderer.encode("no stop here")) + [renderer.eot_id]


def test_stop_cut_finds_the_first_completing_token():
    pieces = ["ab", "c<", "/co", "de>", "x"]
    decode = lambda ids: "".join(pieces[i] for i in ids)  # noqa: E731
    assert stop_cut([0, 1, 2, 3, 4], ["</code>"], decode) == 4
    assert stop_cut([0, 1, 2, 3, 4], ["c<", "</code>"], decode) == 2
    assert stop_cut([0, 1, 2, 3, 4], ["zzz"], decode) is None
    assert stop_cut([], ["x"], decode) is None



def test_serve_forces_what_its_modes_say(tmp_path):
    """`harnessrl serve --temperature-mode force`: a harness's temperature 0 is overridden and recorded."""
    import subprocess
    import sys

    from harnessrl.store import RunStore

    from .test_cli import start_serve

    proc, urls = start_serve(tmp_path, "--default-temperature", "0.8", "--temperature-mode", "force")
    try:
        chat(f"{urls['openai']}/chat/completions", temperature=0.0)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    with RunStore(tmp_path) as store:
        (call,) = store.list_calls()
        assert call.temperature == 0.8 and call.meta["sampling"]["forced"] == ["temperature"]
        assert store.get_meta("serve")["force"] == ["temperature"]
    bad = subprocess.run([sys.executable, "-m", "harnessrl.cli", "serve", "--engine", "scripted",
                          "--top-p-mode", "always"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--top-p-mode always" in bad.stderr


def test_scripted_serve_engine_has_the_window_serve_help_names(renderer):
    """`serve --engine scripted` without --max-model-len: the model's window, 8192 for SmolLM2 (as
    `serve --help` says), not 4096."""
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.proxy.cli import build_engine

    assert build_engine("scripted", smollm2_tokenizer_dir(), None, renderer).max_model_len == 8192
    assert build_engine("scripted", smollm2_tokenizer_dir(), 1024, renderer).max_model_len == 1024
