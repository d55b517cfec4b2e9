"""`harnessrl sft` on a small real run (model tier): SmolLM2-135M served through the HF engine runs
the white-box agent on built-in tasks (local sandbox); SFT on that run's recorded calls raises the
log-likelihood of those trajectories under the written checkpoint (a plain HF forward, not the
trainer's packing), and (vllm tier) vLLM serves the checkpoint."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """Two tasks x 3 white-box rollouts of the real model, one turn of at most 48 tokens each."""
    from harnessrl.engine import make_engine, resolve_model
    from harnessrl.engine.factory import EngineConfig
    from harnessrl.proxy.server import ProxyServer
    from harnessrl.proxy.serving import ServingPolicy
    from harnessrl.render.renderer import Renderer
    from harnessrl.rollout.jobs import run_groups
    from harnessrl.sandbox.base import SandboxConfig
    from harnessrl.store import RunStore
    from harnessrl.tasks import load_tasks

    run_dir = tmp_path_factory.mktemp("sft") / "run"
    model_dir = resolve_model(None)
    engine = make_engine(EngineConfig(type="hf", model=str(model_dir), seed=0))
    store = RunStore(run_dir)
    server = ProxyServer(engine, store, Renderer.from_pretrained(model_dir),
                         policy=ServingPolicy(max_tokens_cap=48)).start()
    try:
        tasks = load_tasks("builtin:write_word:train")[:2]
        records = run_groups(tasks, ["whitebox"], 3, proxy=server, store=store,
                             sandbox_cfg=SandboxConfig(type="local"), concurrency=3, max_turns=1, progress=False)
    finally:
        server.stop()
        engine.close()
        store.close()
    assert len(records) == 6 and all(r.call_count == 1 for r in records), [r.error for r in records]
    return run_dir


def test_sft_raises_the_likelihood_of_its_trajectories(small_run, tmp_path):
    from harnessrl.engine import resolve_model
    from harnessrl.sft.fine_tune import SFTOptions, run_sft
    from harnessrl.store import RunStore

    from .test_learning import rollout_logps

    out = tmp_path / "sft"
    result = run_sft([small_run], out, SFTOptions(mode="distill", epochs=3, lr=1e-4))
    assert result.rollouts == 6 and result.sampled_tokens > 0 and not result.warnings  # the proxy recorded its tokenizer
    assert result.nll_after < result.nll_before
    assert (out / "policy" / "config.json").is_file() and (out / "policy" / "tokenizer_config.json").is_file()
    store = RunStore(small_run)
    try:
        calls = store.list_calls()
    finally:
        store.close()
    calls = [replace(c, temperature=1.0) for c in calls]  # the model's own distribution, as SFT trains it
    before, after = rollout_logps(resolve_model(None), calls), rollout_logps(out / "policy", calls)
    print("log p before / after", sum(before.values()), sum(after.values()))
    assert sum(after.values()) > sum(before.values())


@pytest.mark.vllm
def test_vllm_serves_the_sft_checkpoint(small_run, tmp_path):
    from harnessrl.engine.base import SamplingParams
    from harnessrl.engine.vllm_engine import VLLMEngine
    from harnessrl.sft.fine_tune import SFTOptions, run_sft

    out = tmp_path / "sft"
    run_sft([small_run], out, SFTOptions(mode="distill", epochs=1, lr=1e-5))
    engine = VLLMEngine(str(out / "policy"), dtype="float32", max_model_len=512, max_num_seqs=2, kv_cache_gib=0.25)
    try:
        gen = asyncio.run(engine.generate([1, 2, 3, 4], SamplingParams(temperature=0.0, max_tokens=4)))
    finally:
        engine.close()
    assert len(gen.token_ids) >= 1 and len(gen.logprobs) == len(gen.token_ids)
