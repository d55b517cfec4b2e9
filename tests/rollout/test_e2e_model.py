"""End to end with the real thing: SmolLM2-135M-Instruct (HF engine) behind the real proxy, the
builtin agent inside bwrap, a built-in task, the verifier's reward stored with the calls."""

from __future__ import annotations

import pytest

from harnessrl.proxy.server import ProxyServer
from harnessrl.proxy.serving import ServingPolicy
from harnessrl.rollout.jobs import run_groups
from harnessrl.sandbox.base import SandboxConfig
from harnessrl.tasks import load_tasks

pytestmark = [pytest.mark.model, pytest.mark.bwrap]


def test_real_model_rollouts_are_scored_and_recorded(store):
    from harnessrl.engine import EngineConfig, make_engine, resolve_model

    engine = make_engine(EngineConfig(type="hf", max_model_len=2048, max_batch=4))
    task = load_tasks("builtin:write_word:test")[0]
    server = ProxyServer(engine, store, resolve_model(None), policy=ServingPolicy(default_temperature=0.7)).start()
    try:
        records = run_groups([task], ["builtin"], 2, proxy=server, store=store, sandbox_cfg=SandboxConfig(type="bwrap"),
                             concurrency=2, max_turns=2, harness_timeout_s=900, progress=False,
                             harness_options={"builtin": {"extra_args": ("--max-tokens", "48")}})
    finally:
        server.stop()
        engine.close()
    assert [r.status for r in records] == ["ok", "ok"], [r.error for r in records]
    word, name = task.metadata["word"], task.metadata["file"]  # the suite's first held-out write_word task
    for r in records:
        assert 0.0 <= r.reward <= 1.0 and set(r.checks) == {f"{name} exists", f"{name} holds '{word}'"}
        calls = store.list_calls([r.rollout_id])
        assert 1 <= len(calls) == r.call_count <= 2
        assert all(c.sampled_ids and len(c.logprobs) == len(c.sampled_ids) for c in calls)
        assert all(c.temperature == pytest.approx(0.7) for c in calls)  # the served temperature is recorded
