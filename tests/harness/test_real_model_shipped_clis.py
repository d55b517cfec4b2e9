"""opencode and qwen-code (shipped adapters) driven by the REAL SmolLM2-135M-Instruct (HF engine,
greedy) through the proxy in bwrap, in the `bash_examples` tool format: the model's ```bash block
must reach the harness's own shell tool and run there (the file it writes is in the empty
workspace afterwards), and every call must be stored with sampled ids and logprobs."""

from __future__ import annotations

import pytest

from harnessrl.harness import make_harness

pytestmark = [pytest.mark.harness, pytest.mark.model, pytest.mark.bwrap, pytest.mark.timeout(1200)]
INSTRUCTION = "Create the file hello.txt that contains the word hello. Run this command: echo hello > hello.txt"


@pytest.fixture(scope="module")
def greedy_rig(tmp_path_factory):
    from harnessrl.engine.hf import HFEngine
    from harnessrl.engine.model import resolve_model
    from harnessrl.proxy.server import ProxyServer
    from harnessrl.proxy.serving import ServingPolicy
    from harnessrl.render.renderer import Renderer
    from harnessrl.store import RunStore

    model_dir = resolve_model(None)
    engine = HFEngine(str(model_dir), max_model_len=8192, num_threads=2)
    store = RunStore(tmp_path_factory.mktemp("run"))
    renderer = Renderer.from_pretrained(model_dir, tool_format="bash_examples")
    server = ProxyServer(engine, store, renderer, policy=ServingPolicy(
        max_tokens=48, max_tokens_cap=48, default_temperature=0.0, force=("temperature",))).start()
    yield server, store
    server.stop()
    engine.close()


@pytest.mark.parametrize("spec", ["opencode:small", "qwen-code:small"])
def test_small_model_runs_a_shell_command_through_the_cli(spec, greedy_rig, kit, tmp_path):
    kit.require_installed(spec.split(":")[0])  # installs it into the cache, as `make harnesses` does
    adapter = make_harness(spec)
    assert not adapter.preflight(), adapter.preflight()
    server, store = greedy_rig
    src = tmp_path / "ws"
    src.mkdir()
    rid = f"{spec}-smollm2"
    key = server.register_rollout(rid, max_calls=4)
    with kit.bwrap_for(adapter, src, server.port, key) as sb:
        res = adapter.run(sb, instruction=INSTRUCTION, proxy_base=f"{sb.proxy_base}/r/{key}", api_key=key,
                          model="smollm2", timeout_s=600, max_turns=4)
        wrote = sb.run(["cat", "hello.txt"]).stdout.strip()
    calls = sorted(store.list_calls([rid]), key=lambda c: c.seq)
    served = [c for c in calls if c.status == "ok"]
    assert served, (res.status, res.error)
    for c in served:
        assert 0 < len(c.sampled_ids) <= 48 and len(c.logprobs) == len(c.sampled_ids)
    # the workspace started empty: hello.txt exists only if a command the model wrote ran in the
    # CLI's own shell tool (what the greedy 135M model writes into it varies: "hello", "Hello, World!")
    assert wrote, f"{spec}: no command of the model ran through the harness ({res.status}: {res.error})"
