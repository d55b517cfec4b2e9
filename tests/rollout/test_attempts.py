"""Retries never mix attempts (issue 25): only an attempt that made no model call is retried, each
attempt has a proxy key of its own (closed before the next starts), and the rollout's stored
calls are its final attempt's; earlier attempts are kept apart in meta["earlier_attempts"]."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from harnessrl.harness.base import HarnessAdapter, HarnessResult
from harnessrl.harness.builtin import BuiltinAdapter
from harnessrl.rollout import jobs as runner_mod
from harnessrl.rollout.jobs import RolloutJob, RunOptions, run_rollout
from harnessrl.rollout.proxy_link import LocalProxy
from harnessrl.sandbox.base import SandboxConfig
from harnessrl.tasks.verifier import VerifierResult

LOCAL = SandboxConfig(type="local")


def _job(task, idx=0):
    return RolloutJob(task, "builtin", f"g-{task.id}", idx)


def _call(proxy_base: str, key: str) -> int:
    body = json.dumps({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}).encode()
    req = urllib.request.Request(proxy_base + "/v1/chat/completions", body,
                                 {"Content-Type": "application/json", "Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code


def test_a_verifier_sandbox_failure_after_calls_is_not_retried(proxy, store, tasks, monkeypatch):
    """The verifier's sandbox fails (the host's fault) after the policy was served calls: recorded
    sandbox_error once, with that attempt's calls; before, the rollout ran 3 times into one record."""
    monkeypatch.setattr(runner_mod, "run_verifier", lambda *a, **k: VerifierResult(
        "sandbox_error", None, error="the verifier's sandbox did not start: no namespaces"))
    rec = run_rollout(_job(tasks[1]), BuiltinAdapter(), LocalProxy(proxy), store,
                      RunOptions(sandbox_cfg=LOCAL, max_turns=3, start_retries=2))
    assert (rec.status, rec.reward, rec.meta["attempts"]) == ("sandbox_error", None, 1)
    assert rec.call_count == 2 and store.count_calls(rec.rollout_id) == 2  # one attempt's calls
    assert "earlier_attempts" not in rec.meta


class _LateCaller(HarnessAdapter):
    """Attempt 1 fails without a call; attempt 2 first sends a request with attempt 1's key (a
    late request of the failed attempt), then makes its own call."""

    name = "late"

    def __init__(self):
        self.keys: list[str] = []
        self.late_status = 0

    def run(self, sandbox, *, proxy_base, api_key, **kwargs):
        self.keys.append(api_key)
        root = proxy_base.rsplit("/r/", 1)[0]
        if len(self.keys) == 1:
            return HarnessResult("harness_error", 1, "", 0.0, error="failed before any call")
        self.late_status = _call(f"{root}/r/{self.keys[0]}", self.keys[0])
        assert _call(proxy_base, api_key) == 200
        return HarnessResult("ok", 0, "", 0.0)


def test_each_attempt_has_its_own_key_and_only_the_final_attempts_calls_are_stored(proxy, store, tasks):
    harness = _LateCaller()
    rec = run_rollout(_job(tasks[0]), harness, LocalProxy(proxy), store,
                      RunOptions(sandbox_cfg=LOCAL, max_turns=3, start_retries=2))
    assert len(harness.keys) == 2 and harness.keys[0] != harness.keys[1]
    assert harness.late_status == 401  # the failed attempt's key was closed before the retry
    assert rec.meta["attempts"] == 2 and rec.status == "ok" and rec.reward is not None
    assert rec.meta["earlier_attempts"] == [{"status": "harness_error", "error": "failed before any call"}]
    calls = store.list_calls([rec.rollout_id])
    assert len(calls) == 1 == rec.call_count and [c.seq for c in calls] == [0]


def test_a_start_failure_that_made_a_call_is_final(proxy, store, tasks):
    """A harness_error after a served call is the policy's end: scored, never retried."""

    class CallsThenFails(_LateCaller):
        def run(self, sandbox, *, proxy_base, api_key, **kwargs):
            self.keys.append(api_key)
            assert _call(proxy_base, api_key) == 200
            return HarnessResult("harness_error", 1, "", 0.0, error="crashed after its call")

    harness = CallsThenFails()
    rec = run_rollout(_job(tasks[0], 1), harness, LocalProxy(proxy), store,
                      RunOptions(sandbox_cfg=LOCAL, max_turns=3, start_retries=2))
    assert len(harness.keys) == 1 and rec.meta["attempts"] == 1
    assert rec.status == "harness_error" and rec.reward == 0.0 and rec.call_count == 1
