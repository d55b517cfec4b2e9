"""The harnesses the small default model can drive (builtin, mini-swe-agent text mode), with the REAL
SmolLM2-135M-Instruct (HF engine) behind the proxy, inside bwrap. Whatever the model does, the run
must end with a reported status, every call must be in the store with sampled ids and logprobs,
and consecutive calls must keep the prefix property, except where the harness itself rewrote the
history: mini-swe-agent drops a reply that had a format error (no fenced block) from the next
request, a real branch for the prefix tree."""

from __future__ import annotations

import pytest

from harnessrl.harness import make_harness

pytestmark = [pytest.mark.harness, pytest.mark.model, pytest.mark.bwrap, pytest.mark.timeout(1200)]
MAX_TOKENS = 32  # HF generate on 2 shared cores: keep each call short


@pytest.fixture(scope="module")
def real_rig(tmp_path_factory):
    from harnessrl.engine.hf import HFEngine
    from harnessrl.engine.model import resolve_model
    from harnessrl.proxy.server import ProxyServer
    from harnessrl.proxy.serving import ServingPolicy
    from harnessrl.render.renderer import Renderer
    from harnessrl.store import RunStore

    model_dir = resolve_model(None)
    engine = HFEngine(str(model_dir), max_model_len=8192, num_threads=2)
    store = RunStore(tmp_path_factory.mktemp("run"))
    renderer = Renderer.from_pretrained(model_dir)
    server = ProxyServer(engine, store, renderer, policy=ServingPolicy(max_tokens=MAX_TOKENS)).start()
    yield server, store
    server.stop()
    engine.close()


@pytest.mark.parametrize("spec,options", [("builtin", {"extra_args": ("--max-tokens", str(MAX_TOKENS))}),
                                          ("mini-swe-agent", {"max_tokens": MAX_TOKENS})])
def test_small_model_drives_harness(spec, options, real_rig, kit, tmp_path):
    from harnessrl.sandbox import ProxyEndpoint, SandboxConfig, SandboxUnavailable, make_sandbox

    server, store = real_rig
    adapter = make_harness(spec, **options)
    src = tmp_path / "ws"
    src.mkdir()
    (src / "notes.txt").write_text("apple\n")
    rid = f"{spec}-smollm2"
    key = server.register_rollout(rid)
    cfg = SandboxConfig(type="bwrap", extra_ro_binds=[str(p) for p in adapter.ro_paths()])
    try:
        sb = make_sandbox(cfg, workspace_src=src, proxy=ProxyEndpoint(server.port, key=key))
    except SandboxUnavailable as e:
        pytest.skip(f"bwrap is not usable here: {e}")
    with sb:
        res = adapter.run(sb, instruction="Write the word hello into the file hello.txt.",
                          proxy_base=f"{sb.proxy_base}/r/{key}", api_key=key, model="smollm2",
                          timeout_s=600, max_turns=2)
    assert res.status in ("ok", "harness_error"), (res.status, res.error)
    calls = sorted(store.list_calls([rid]), key=lambda c: c.seq)
    assert 1 <= len(calls) <= 3  # max_turns bounds the calls (mini: 2 steps; +1 if it reports a format error)
    for c in calls:
        assert c.status == "ok" and 0 < len(c.sampled_ids) <= MAX_TOKENS
        assert len(c.logprobs) == len(c.sampled_ids) and all(lp <= 0.0 for lp in c.logprobs)
    raw = {c.call_id: c for c in store.list_calls([rid], include_raw=True)}
    for k in kit.prefix_breaks(calls):
        assert spec == "mini-swe-agent", f"{spec}: call {k + 1} does not extend call {k}"
        reply = raw[calls[k].call_id].response["choices"][0]["message"]["content"]
        resent = [m.get("content") for m in raw[calls[k + 1].call_id].request["messages"]
                  if m.get("role") == "assistant"]
        assert reply not in resent  # the harness dropped that reply: a rewrite, not a capture error
