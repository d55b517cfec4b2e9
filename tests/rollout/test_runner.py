"""The runner with a scripted policy behind the real proxy, the real builtin agent, and the local
sandbox: statuses, rewards, groups, retries, store."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from harnessrl.harness.base import HarnessAdapter, HarnessResult
from harnessrl.harness.builtin import BuiltinAdapter
from harnessrl.rollout import jobs as runner_mod
from harnessrl.rollout.proxy_link import LocalProxy
from harnessrl.rollout.jobs import RolloutJob, RunOptions, run_groups, run_rollout
from harnessrl.sandbox.base import SandboxConfig, SandboxError
from harnessrl.tasks.model import Verifier

LOCAL = SandboxConfig(type="local")


def test_groups_rewards_and_store(proxy, store, tasks):
    records = run_groups(tasks, ["builtin"], 2, proxy=proxy, store=store, sandbox_cfg=LOCAL, concurrency=2,
                         step=3, max_turns=3, progress=False)
    assert [(r.task_id, r.sample_idx) for r in records] == [(t.id, i) for t in tasks for i in range(2)]
    assert {r.status for r in records} == {"ok"}, [(r.status, r.error[-800:]) for r in records if r.status != "ok"]
    for r in records:
        solved = not r.task_id.startswith("write_word")
        assert r.reward == (1.0 if solved else 0.0), r
        assert r.call_count == (2 if solved else 1)  # command + "Done." / a bare answer
        assert r.step == 3 and r.harness == "builtin" and r.category
        assert {"sandbox_s", "harness_s", "verifier_s", "total_s"} <= set(r.durations)
    groups = {r.group_id for r in records}
    assert len(groups) == len(tasks)  # one group per (task, harness), n rollouts each
    stored = {r.rollout_id: r for r in store.list_rollouts(step=3)}
    assert stored == {r.rollout_id: r for r in records}
    assert len(store.list_calls([r.rollout_id for r in records])) == sum(r.call_count for r in records)


def test_mixed_harnesses_one_harness_per_group(proxy, store, tasks):
    records = run_groups(tasks[:2], ["builtin", "command:true"], 1, proxy=proxy, store=store, sandbox_cfg=LOCAL,
                         concurrency=2, progress=False)
    by_group = {}
    for r in records:
        by_group.setdefault(r.group_id, set()).add(r.harness)
    assert len(by_group) == 4 and all(len(h) == 1 for h in by_group.values())
    cmd = [r for r in records if r.harness == "command:true"]
    assert all(r.status == "ok" and r.call_count == 0 and r.reward < 1.0 for r in cmd)


def _job(task, idx=0):
    return RolloutJob(task, "builtin", f"g-{task.id}", idx)


def test_sandbox_start_failures_are_retried_then_recorded(proxy, store, tasks, monkeypatch):
    real = runner_mod.open_task_sandbox
    failures = {"left": 2}

    def flaky(*args, **kwargs):
        if failures["left"] > 0:
            failures["left"] -= 1
            raise SandboxError("no more namespaces")
        return real(*args, **kwargs)

    monkeypatch.setattr(runner_mod, "open_task_sandbox", flaky)
    opts = RunOptions(sandbox_cfg=LOCAL, max_turns=3, start_retries=2)
    ok = run_rollout(_job(tasks[1]), BuiltinAdapter(), LocalProxy(proxy), store, opts)
    assert (ok.status, ok.reward, ok.meta["attempts"]) == ("ok", 1.0, 3)

    failures["left"] = 10
    bad = run_rollout(_job(tasks[1], 1), BuiltinAdapter(), LocalProxy(proxy), store, opts)
    assert (bad.status, bad.reward, bad.meta["attempts"]) == ("sandbox_error", None, 3)
    assert "no more namespaces" in bad.error
    assert store.get_rollout(bad.rollout_id).status == "sandbox_error"


class _BrokenHarness(HarnessAdapter):
    """Fails before making any model call (e.g. its binary is missing)."""

    name = "broken"

    def __init__(self):
        self.runs = 0

    def run(self, sandbox, **kwargs):
        self.runs += 1
        return HarnessResult("harness_error", 127, "", 0.0, error="broken: command not found")


def test_harness_start_failure_retried_then_recorded(proxy, store, tasks):
    harness = _BrokenHarness()
    rec = run_rollout(_job(tasks[0]), harness, LocalProxy(proxy), store, RunOptions(sandbox_cfg=LOCAL, start_retries=1))
    assert harness.runs == 2
    assert (rec.status, rec.reward, rec.call_count) == ("harness_error", None, 0)
    assert "command not found" in rec.error


def test_timeout_and_verifier_error(proxy, store, tasks):
    link = LocalProxy(proxy)
    slow = RunOptions(sandbox_cfg=LOCAL, harness_timeout_s=0.5, max_turns=3)
    rec = run_rollout(_job(tasks[1]), BuiltinAdapter(extra_args=("--call-timeout", "60")), link, store, slow)
    assert rec.status in ("timeout",) and rec.meta["attempts"] == 1
    # a timeout is the policy's end once it was served a call: scored like any other end
    served = sum(c.status == "ok" for c in store.list_calls([rec.rollout_id]))
    assert (rec.reward is None) == (served == 0)

    # a verifier failing on the workspace the policy left is scored 0, never left out
    garbage = replace(tasks[1], verifier=Verifier("checks", "echo not json"))
    rec = run_rollout(_job(garbage, 1), BuiltinAdapter(), link, store, RunOptions(sandbox_cfg=LOCAL, max_turns=3))
    assert (rec.status, rec.reward) == ("verifier_error", 0.0)
    assert rec.call_count == 2 and "not a JSON object" in rec.error


def test_prompt_too_long_is_a_context_exceeded_rollout(renderer, store, tasks):
    """The proxy refuses a prompt longer than the model's context with its typed "too long" error;
    the harness gives up and the rollout says so (context_exceeded), with the proxy's message."""
    from harnessrl.proxy.server import ProxyServer

    from .solver import solver_engine

    engine = solver_engine(renderer, tasks, lambda t: True)
    engine.max_model_len = 64  # every prompt of the builtin agent is longer
    server = ProxyServer(engine, store, renderer).start()
    try:
        rec = run_rollout(_job(tasks[1]), BuiltinAdapter(), LocalProxy(server), store,
                          RunOptions(sandbox_cfg=LOCAL, max_turns=3, start_retries=2))
    finally:
        server.stop()
    assert (rec.status, rec.reward) == ("context_exceeded", None)
    assert "context exceeded" in rec.error and "64" in rec.error
    assert rec.meta["attempts"] == 1  # a refused call is a call: never retried as a start failure
    calls = store.list_calls([rec.rollout_id])
    assert calls and all(c.status == "error" and c.meta["error_kind"] == "too_long" for c in calls)
    assert store.get_rollout(rec.rollout_id).status == "context_exceeded"


def test_every_rollout_records_its_harness_profile(proxy, store, tasks):
    records = run_groups(tasks[:1], ["builtin", "mini-swe-agent:tool", "command:true"], 1, proxy=proxy,
                         store=store, sandbox_cfg=LOCAL, max_turns=1, harness_timeout_s=60, progress=False)
    by_spec = {r.harness: r for r in store.list_rollouts()}
    assert by_spec["builtin"].profile == "full"
    assert by_spec["mini-swe-agent:tool"].profile == "tool"
    assert by_spec["mini-swe-agent:tool"].meta["harness_profile"]["settings"] == {"format": "tools"}
    assert by_spec["command:true"].profile == "" and len(records) == 3


def test_interrupt_ends_running_harnesses_and_records_them_cancelled(proxy, store, tasks):
    """Ctrl-C (or SIGTERM, which the CLI turns into KeyboardInterrupt) while rollouts run: their
    harnesses are ended with their sandboxes instead of running out their 600 s limit, rollouts not
    yet started never start, and the ended ones are stored as `cancelled` (nothing half-written)."""
    import os
    import signal
    import threading

    import pytest

    threading.Timer(3.0, os.kill, (os.getpid(), signal.SIGINT)).start()  # the harnesses are asleep by then
    with pytest.raises(KeyboardInterrupt):
        run_groups(tasks[:1], ["command:sleep 617"], 3, proxy=proxy, store=store, sandbox_cfg=LOCAL,
                   concurrency=2, harness_timeout_s=600, progress=False)
    stored = store.list_rollouts()
    assert len(stored) == 2  # the two that were running; the third was never started
    assert {r.status for r in stored} == {"cancelled"} and all(r.reward is None for r in stored)
    left = [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmdline(p) == "sleep 617"]
    assert not left, f"harness processes outlived their sandboxes: {left}"


def _cmdline(proc_dir) -> str:
    try:
        return (proc_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def test_a_batch_where_every_rollout_failed_to_start_is_a_typed_error(proxy, store, tasks):
    """A broken setup (the harness's binary is missing) must not read as a 0% pass rate: the batch
    raises RolloutsFailed with the first error, after every record is stored."""
    import pytest

    from harnessrl.rollout.jobs import RolloutsFailed

    with pytest.raises(RolloutsFailed, match="failed before the model was called") as err:
        run_groups(tasks[:1], ["command:/nonexistent/harness-binary"], 2, proxy=proxy, store=store,
                   sandbox_cfg=LOCAL, concurrency=2, start_retries=0, progress=False)
    assert "harness install" not in str(err.value)  # a command: harness is never installed by harnessrl
    assert "ro (command[ro=DIR]" in str(err.value) and "harness check" in str(err.value)
    assert {r.status for r in store.list_rollouts()} == {"harness_error"} and len(store.list_rollouts()) == 2


def test_a_harness_without_a_turn_limit_is_bounded_by_the_call_budget(proxy, store, tasks):
    """For a harness with no turn limit of its own (Codex, OpenClaw: `enforces_max_turns = False`)
    the rollout's proxy key gets max_turns model calls; the harness's next call gets a typed 400, and
    the rollout is the policy's end: scored by the verifier (status ok), not a harness error."""

    class NoTurnLimit(BuiltinAdapter):
        enforces_max_turns = False

    adapter = NoTurnLimit(extra_args=("--max-turns", "50"))  # the agent itself would go on
    rec = run_rollout(_job(tasks[1]), adapter, LocalProxy(proxy), store, RunOptions(sandbox_cfg=LOCAL, max_turns=1))
    assert (rec.status, rec.reward, rec.meta["end_reason"]) == ("ok", 1.0, "call_budget"), rec.error
    calls = sorted(store.list_calls([rec.rollout_id]), key=lambda c: c.seq)
    assert [c.status for c in calls] == ["ok", "error"] and calls[1].meta["error_kind"] == "call_budget"


def test_a_command_harness_gets_max_turns_calls_and_is_scored(proxy, store, tasks):
    """A `command:` CLI that goes on calling (qwen-code made 9 calls under --max-turns 3) gets
    max_turns calls at the proxy; the next is refused and the rollout is scored as the policy's end."""
    import sys

    from harnessrl.harness.command import CommandAdapter

    agent = Path(__file__).with_name("summariser_agent.py")  # two calls, each answered when allowed
    rec = run_rollout(RolloutJob(tasks[1], "command", "g-budget", 0), CommandAdapter(f"{sys.executable} {agent}"),
                      LocalProxy(proxy), store, RunOptions(sandbox_cfg=LOCAL, max_turns=1))
    calls = sorted(store.list_calls([rec.rollout_id]), key=lambda c: c.seq)
    assert [c.status for c in calls] == ["ok", "error"] and calls[1].meta["error_kind"] == "call_budget"
    assert (rec.status, rec.meta["end_reason"]) == ("ok", "call_budget") and rec.reward is not None


def test_a_context_refusal_anywhere_is_context_exceeded_never_ok(renderer, store, tasks):
    """A harness that got the typed "too long" error and went on (a summariser call that was served,
    as qwen-code does) made a context_exceeded rollout, scored like any policy end, never `ok`."""
    import sys

    from harnessrl.harness.command import CommandAdapter
    from harnessrl.proxy.server import ProxyServer

    from .solver import solver_engine

    engine = solver_engine(renderer, tasks, lambda t: True)
    engine.max_model_len = 256  # the 400-word request does not fit, the short one does
    agent = Path(__file__).with_name("summariser_agent.py")
    server = ProxyServer(engine, store, renderer).start()
    try:
        rec = run_rollout(RolloutJob(tasks[1], "command", "g-refused", 0), CommandAdapter(f"{sys.executable} {agent}"),
                          LocalProxy(server), store, RunOptions(sandbox_cfg=LOCAL, max_turns=3))
    finally:
        server.stop()
    calls = store.list_calls([rec.rollout_id])
    assert [c.status for c in calls] == ["error", "ok"]  # the refused call was not the last one
    assert rec.status == "context_exceeded" and rec.reward is not None  # scored, under its own status
    assert rec.meta["context_refusals"] == 1 and "256" in rec.error
    assert rec.meta["call_classes"] == {"1": "main"}  # the class of each served call, by seq
