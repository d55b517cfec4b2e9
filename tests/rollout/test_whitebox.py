"""The white-box AgentLoop (`harness: whitebox`): on a scripted engine, its records equal those the
builtin agent leaves through the proxy (same prompt ids for the same replies), and its refusals
and limits end a rollout the way the proxy's would."""

from __future__ import annotations

import pytest

from harnessrl.engine.scripted import ScriptedEngine
from harnessrl.harness import HarnessConfigError, make_harness
from harnessrl.harness.builtin import BuiltinAdapter
from harnessrl.proxy.server import ProxyServer
from harnessrl.proxy.serving import ServingPolicy
from harnessrl.rollout.jobs import RolloutJob, RunOptions, run_plans, run_rollout
from harnessrl.rollout.plan import GroupPlan
from harnessrl.rollout.proxy_link import LocalProxy, RemoteProxy
from harnessrl.sandbox.base import SandboxConfig

from .solver import solver_engine

LOCAL = RunOptions(sandbox_cfg=SandboxConfig(type="local"), max_turns=4)
SAME = ("seq", "prompt_ids", "sampled_ids", "logprobs", "prompt_provenance", "policy_version", "temperature",
        "top_p", "finish_reason", "status")


def _rollout(adapter, engine, renderer, store, task, rid, opts=LOCAL):
    server = ProxyServer(engine, store, renderer, policy=ServingPolicy(max_tokens_cap=200)).start()
    try:
        link = LocalProxy(server)
        adapter.bind_proxy(link)
        job = RolloutJob(task, adapter.name, f"g-{rid}", 0)
        rec = run_rollout(job, adapter, link, store, opts)
    finally:
        server.stop()
    return rec, sorted(store.list_calls([job.rollout_id], include_raw=True), key=lambda c: c.seq)


def test_whitebox_records_equal_builtin_through_the_proxy(renderer, store, tasks):
    """Two tasks, each solved in two turns (a bash block, then "Done."): per call, the white-box
    loop's prompt ids, sampled ids, provenance and sampling equal builtin-through-proxy's."""
    for task in tasks:
        engine_a, engine_b = solver_engine(renderer, [task]), solver_engine(renderer, [task])
        rec_a, calls_a = _rollout(BuiltinAdapter(), engine_a, renderer, store, task, f"bi-{task.family}")
        rec_b, calls_b = _rollout(make_harness("whitebox"), engine_b, renderer, store, task, f"wb-{task.family}")
        assert (rec_a.status, rec_a.reward) == (rec_b.status, rec_b.reward) == ("ok", 1.0), (rec_a.error, rec_b.error)
        assert len(calls_a) == len(calls_b) == 2
        for a, b in zip(calls_a, calls_b):
            assert {k: getattr(a, k) for k in SAME} == {k: getattr(b, k) for k in SAME}
            assert a.meta["sampling"] == b.meta["sampling"]  # the cap (200) on the agent's 256
            assert b.meta["sampling"]["max_tokens"] == 200
            assert (a.protocol, b.protocol) == ("openai.chat", "whitebox")
        # the second call extends the first one's prompt + completion, its reply reused as sampled ids
        assert calls_b[1].prompt_ids[:len(calls_b[0].prompt_ids) + len(calls_b[0].sampled_ids)] == \
            calls_b[0].prompt_ids + calls_b[0].sampled_ids
        assert rec_b.meta["harness_meta"]["stop"] == "final" and rec_b.meta["harness_meta"]["commands"] == 1
        assert engine_a.calls[0][0] == engine_b.calls[0][0]  # what the engine saw, not only what was stored


def test_whitebox_follows_the_proxys_forced_sampling(renderer, store, tasks):
    """A run that forces the temperature (serve.temperature_mode force) overrides the 0.7 an agent
    option sends."""
    engine = ScriptedEngine(lambda ids: renderer.encode("Done.") + [renderer.eot_id], eos_ids=renderer.stop_ids)
    server = ProxyServer(engine, store, renderer,
                         policy=ServingPolicy(default_temperature=1.0, force=("temperature",))).start()
    try:
        adapter = make_harness("whitebox", temperature=0.7)
        adapter.bind_proxy(LocalProxy(server))
        job = RolloutJob(tasks[0], "whitebox", "g-forced", 0)
        run_rollout(job, adapter, LocalProxy(server), store, LOCAL)
    finally:
        server.stop()
    (call,) = store.list_calls([job.rollout_id])
    assert call.temperature == 1.0 and call.meta["sampling"]["forced"] == ["temperature"]
    assert engine.calls[0][1].temperature == 1.0


def test_whitebox_prompt_too_long_is_context_exceeded(renderer, store, tasks):
    engine = ScriptedEngine(lambda ids: renderer.encode("x") + [renderer.eot_id], max_model_len=64,
                            eos_ids=renderer.stop_ids)
    rec, calls = _rollout(make_harness("whitebox"), engine, renderer, store, tasks[0], "wb-long")
    assert rec.status == "context_exceeded", rec.error
    assert [c.status for c in calls] == ["error"] and calls[0].meta["error_kind"] == "too_long"
    assert engine.n_calls == 0


def test_whitebox_stops_at_max_turns(renderer, store, tasks):
    engine = ScriptedEngine(lambda ids: renderer.encode("```bash\ntrue\n```") + [renderer.eot_id],
                            eos_ids=renderer.stop_ids)
    rec, calls = _rollout(make_harness("whitebox"), engine, renderer, store, tasks[0], "wb-turns",
                          RunOptions(sandbox_cfg=SandboxConfig(type="local"), max_turns=3))
    assert len(calls) == 3 and rec.meta["harness_meta"]["stop"] == "max_turns"
    assert rec.status == "ok" and rec.reward == 0.0


def test_whitebox_needs_the_in_process_proxy(store, tasks):
    plan = GroupPlan(group_id="g-remote", task=tasks[0], harness="whitebox", n=1, split="test", step=0)
    with pytest.raises(HarnessConfigError, match="in-process proxy"):
        run_plans([plan], proxy=RemoteProxy("http://127.0.0.1:9", "t"), store=store,
                  opts=RunOptions(sandbox_cfg=SandboxConfig(type="local"), preflight=False))
    with pytest.raises(HarnessConfigError, match="max_tokens"):
        make_harness("whitebox", max_tokens=0)


def test_whitebox_and_the_http_routes_share_one_call_path():
    """White-box calls ProxyServer.call, which runs CallHandler.handle like every HTTP route: it
    repeats no step of the call (render, sampling, generate, commit, record) and reaches into the
    server through no attribute (grep)."""
    import ast
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src" / "harnessrl"
    whitebox = (src / "harness" / "whitebox.py").read_text()
    import re

    for reach in (r"getattr\(", r"\.registry", r"(?<!harnessrl)\.engine\b", r"\.writer", "record_call", "sampling_params",
                  r"\.prepare\(", r"\.commit\(", r"\.generate\("):
        assert re.search(reach, whitebox) is None, reach

    def calls_handle(path: Path) -> bool:
        return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "handle"
                   for n in ast.walk(ast.parse(path.read_text())))

    callers = {p.relative_to(src).as_posix() for p in src.rglob("*.py") if calls_handle(p)}
    assert callers == {"proxy/app.py", "proxy/server.py"}


def test_an_in_process_call_is_recorded_delivered_as_whitebox(renderer, store):
    """ProxyServer.call: one recorded call, protocol "whitebox", marked delivered; an unknown key is
    a KeyError."""
    import asyncio
    import json

    engine = ScriptedEngine(lambda ids: renderer.encode("Done.") + [renderer.eot_id], eos_ids=renderer.stop_ids)
    server = ProxyServer(engine, store, renderer).start()
    try:
        key = server.register_rollout("wb-call")
        request = {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
        reply = asyncio.run(server.call(key, request))
        assert reply.status == 200 and json.loads(reply.body)["choices"][0]["message"]["content"] == "Done."
        assert reply.timings is not None and reply.timings["engine_s"] >= 0
        with pytest.raises(KeyError):
            asyncio.run(server.call("nope", request))
        server.close_rollout(key)
    finally:
        server.stop()
    (call,) = store.list_calls(["wb-call"])
    assert (call.protocol, call.status, call.delivered) == ("whitebox", "ok", True)
