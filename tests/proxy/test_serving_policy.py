"""Serving policy (proxy/serving.py): one frozen ServingPolicy with one default and one bound per
value, built from a RunConfig and taken unchanged by the proxy and the white-box loop; default |
force per knob with sent and used values recorded; one call record for both paths; stop strings of
any length honoured exactly (trained ids end where the stop matched)."""

from __future__ import annotations

import asyncio
import dataclasses

import httpx
import pytest
import typer
from pydantic import ValidationError

from harnessrl.engine.scripted import ScriptedEngine
from harnessrl.harness import builtin_agent as agent
from harnessrl.harness.whitebox import LoopStats, WhiteboxAdapter, model_call
from harnessrl.proxy.server import ProxyServer
from harnessrl.proxy.serving import DEFAULT_POLICY, ServingPolicy, check_forced, resolve, stop_cut
from harnessrl.rollout.proxy_link import LocalProxy
from harnessrl.config import ConfigError, RunConfig, load_config
from harnessrl.store import CallRecord

from .fakes import TextScriptEngine


@pytest.fixture
def serve(store, renderer):
    servers = []

    def start(replies, **kw):
        engine = TextScriptEngine(renderer.encode, renderer.eot_id, replies)
        server = ProxyServer(engine, store, renderer, policy=ServingPolicy(**kw)).start()
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
    engine, url = serve(["a"], max_tokens=64, max_tokens_cap=48, force=("max_tokens",))
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
    bad = subprocess.run([sys.executable, "-m", "harnessrl.app", "serve", "--engine", "scripted",
                          "--top-p-mode", "always"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--top-p-mode always" in bad.stderr


def test_scripted_serve_engine_has_the_window_serve_help_names(renderer):
    """`serve --engine scripted` without --max-model-len: the model's window, 8192 for SmolLM2 (as
    `serve --help` says), not 4096."""
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.app.serve import build_engine

    assert build_engine("scripted", smollm2_tokenizer_dir(), None, renderer).max_model_len == 8192
    assert build_engine("scripted", smollm2_tokenizer_dir(), 1024, renderer).max_model_len == 1024


# -- one value: defaults and bounds in one place ---------------------------------------------------

def test_run_config_builds_the_policy_from_its_serve_settings():
    cfg = load_config(None, ["serve.default_temperature=0.45", "serve.default_top_p=0.9", "serve.max_tokens=64",
                             "serve.temperature_mode=force", "serve.max_tokens_mode=force"])
    assert cfg.serve.policy() == ServingPolicy(default_temperature=0.45, default_top_p=0.9, max_tokens=64,
                                                 max_tokens_cap=64, force=("temperature", "max_tokens"))
    run = RunConfig().serve.policy()  # the run's defaults are the policy's, plus the run's per-call cap
    assert run.model_copy(update={"max_tokens_cap": None}) == DEFAULT_POLICY == ServingPolicy()
    assert run.max_tokens_cap == run.max_tokens == RunConfig().serve.max_tokens
    with pytest.raises(ValidationError, match="frozen"):
        run.default_temperature = 0.1  # type: ignore[misc]


def test_a_training_runs_proxy_records_how_it_serves(store, renderer):
    """The proxy a training run starts (run/runner_collector.py start_proxy, as rollout / eval) stores
    meta "serve" (the run's policy) and "render" (its tool format, exact history), as `harnessrl serve`
    does: a run's calls say how they were served."""
    from harnessrl.render.renderer import Renderer
    from harnessrl.launch import start_proxy

    cfg = load_config(None, ["serve.default_temperature=0.45", "serve.max_tokens=64", "render.tool_format=bash"])
    bash = Renderer.from_pretrained(renderer.tokenizer.name_or_path, tool_format="bash")
    server = start_proxy(cfg, TextScriptEngine(bash.encode, bash.eot_id), store, bash)
    server.stop()
    assert store.get_meta("serve") == cfg.serve.policy().model_dump(mode="json")
    assert store.get_meta("render") == {"tool_format": "bash", "history": "exact"}


@pytest.mark.parametrize("override, bound", [
    ("serve.default_temperature=2.5", "serve.default_temperature"),
    ("serve.default_temperature=-0.1", "serve.default_temperature"),
    ("serve.default_top_p=0", "serve.default_top_p"),
    ("serve.max_tokens=0", "serve.max_tokens"),
])
def test_run_config_refuses_a_value_out_of_its_bound(override, bound):
    with pytest.raises(ConfigError, match=bound.replace(".", r"\.")):
        load_config(None, [override])


def test_the_policy_and_serve_refuse_values_with_the_same_bounds():
    from harnessrl.app.serve import serving_policy

    for bad in ({"default_temperature": 2.5}, {"default_top_p": 0.0}, {"max_tokens": 0},
                {"max_tokens_cap": 0}, {"force": ("seed",)}, {"seed": 1}):
        with pytest.raises(ValidationError):
            ServingPolicy(**bad)
    assert ServingPolicy(default_temperature=0.0).default_temperature == 0.0  # greedy serving is allowed
    # serve's bounds are the run config's (tests/test_cli_flags.py); its own --max-tokens-cap, the policy's
    with pytest.raises(typer.BadParameter, match="--max-tokens-cap 0"):
        serving_policy(RunConfig(), 0)
    cfg = load_config(None, ["serve.max_tokens=64", "serve.default_temperature=0.5", "serve.top_p_mode=force"])
    served = serving_policy(cfg, None)
    assert served == ServingPolicy(default_temperature=0.5, max_tokens=64, max_tokens_cap=64, force=("top_p",))
    # serve caps the way a run does: the max-tokens default is the cap unless --max-tokens-cap is given
    assert serving_policy(RunConfig(), None) == RunConfig().serve.policy()
    assert serving_policy(cfg, 128).max_tokens_cap == 128


def test_the_proxy_and_its_info_hold_the_policy_it_was_given(store, renderer):
    policy = ServingPolicy(default_temperature=0.7, max_tokens_cap=48, force=("temperature",))
    engine = ScriptedEngine(lambda ids: [renderer.eot_id], eos_ids=renderer.stop_ids)
    with ProxyServer(engine, store, renderer, policy=policy) as server:
        assert server.policy is policy
        assert server.info()["serving"] == policy.model_dump(mode="json")
        adapter = WhiteboxAdapter()
        adapter.bind_proxy(LocalProxy(server))
        assert adapter.proxy is server  # white-box calls the proxy, which samples by its policy


# -- one call recorder: the white-box loop and the proxy write the same records --------------------

# fields that name a call (ids, times) or its path: the proxy answers in OpenAI's wire format and
# marks delivery when the last byte is sent; the white-box loop has no wire
PATH_FIELDS = {"call_id", "rollout_id", "t_start", "t_end", "protocol", "response"}
PATH_META = {"rollout_key", "endpoint", "timings", "quota_bytes"}
REPLIES = ["```bash\necho hi\n```", "Done."]


def _scripted(renderer):
    """Reply i to the i-th call of a rollout (counted by the prompt's assistant turns)."""
    n_examples = sum(m["role"] == "assistant" for m in agent.first_messages("bash", "t"))

    def script(prompt_ids):
        turns = renderer.decode(prompt_ids).count("<|im_start|>assistant") - 1 - n_examples
        return list(renderer.encode(REPLIES[min(turns, len(REPLIES) - 1)])) + [renderer.eot_id]

    return ScriptedEngine(script, eos_ids=renderer.stop_ids, fake_logprob=-0.25)


def _conversation():
    """builtin_agent's two requests for one task: the first, then one after its command ran."""
    first = agent.first_messages("bash", "print hi")
    second = first + [{"role": "assistant", "content": REPLIES[0]},
                      {"role": "user", "content": agent.OBSERVATION.format(code=0, output="hi\n")}]
    return [first, second]


@pytest.mark.parametrize("policy", [ServingPolicy(default_temperature=0.7, max_tokens_cap=200),
                                    ServingPolicy(default_temperature=0.9, default_top_p=0.8, max_tokens=32,
                                                  force=("max_tokens",))])
def test_whitebox_and_proxy_paths_write_identical_call_records(store, renderer, policy):
    """The same scripted policy, the same two requests builtin_agent sends (no temperature: the
    policy's applies): the stored records agree field by field but for ids, times and the wire."""
    engine = _scripted(renderer)
    with ProxyServer(engine, store, renderer, policy=policy) as server:
        proxy_key = server.register_rollout("r-proxy")
        url = f"{server.base_urls(proxy_key)['openai']}/chat/completions"
        for messages in _conversation():
            r = httpx.post(url, json={"model": "m", "messages": messages, "max_tokens": 256}, timeout=30)
            assert r.status_code == 200, r.text
        server.close_rollout(proxy_key)
        adapter = WhiteboxAdapter()
        adapter.bind_proxy(LocalProxy(server))
        assert adapter.proxy is not None
        wb_key = server.register_rollout("r-wb")
        loop = asyncio.new_event_loop()
        try:
            replies = [model_call(adapter.proxy, wb_key, loop, messages, "m", adapter.sent, LoopStats())
                       for messages in _conversation()]
        finally:
            loop.close()
        server.close_rollout(wb_key)
    assert replies == REPLIES
    proxy_calls = sorted(store.list_calls(["r-proxy"], include_raw=True), key=lambda c: c.seq)
    wb_calls = sorted(store.list_calls(["r-wb"], include_raw=True), key=lambda c: c.seq)
    assert len(proxy_calls) == len(wb_calls) == 2
    for a, b in zip(proxy_calls, wb_calls):
        for f in dataclasses.fields(CallRecord):
            if f.name not in PATH_FIELDS | {"meta"}:
                assert getattr(a, f.name) == getattr(b, f.name), f.name
        assert {k: v for k, v in a.meta.items() if k not in PATH_META} == \
            {k: v for k, v in b.meta.items() if k not in PATH_META}
        assert (a.protocol, b.protocol) == ("openai.chat", "whitebox")
    used = proxy_calls[0]
    assert (used.temperature, used.top_p) == (policy.default_temperature, policy.default_top_p)
    assert used.meta["sampling"]["sent"]["temperature"] is None
    assert used.meta["sampling"]["max_tokens"] == (32 if policy.force else 200)
    assert wb_calls[1].meta["n_reused"] > 0  # the second call reuses the first one's sampled ids
    assert engine.calls[0][0] == engine.calls[2][0] and engine.calls[1][0] == engine.calls[3][0]
