"""Proxy acceptance (issue 2) with the REAL Claude Code and Codex CLI, headless, in a temp dir
(local sandbox: no isolation needed here) against a real ProxyServer + store + renderer. A scripted
policy emits one tool call in the renderer's format, then a final answer, so each run makes >= 2
calls. Asserts: every call is captured under the rollout, the prefix property holds for every
consecutive pair, and the harness did the work. HARNESSRL_UPDATE_FIXTURES=1 rewrites
tests/fixtures/harness_calls/<harness>.jsonl (two rollouts = one group, for the tree tests)."""

from __future__ import annotations

import warnings

import pytest

from harnessrl.harness import make_harness

pytestmark = [pytest.mark.harness, pytest.mark.timeout(900)]

PROTOCOL = {"claude-code": "anthropic.messages", "codex": "openai.responses"}


def _run_local(kit, rig, harness: str, rollout_id: str, tmp_path, timeout_s: float = 300):
    from harnessrl.sandbox import ProxyEndpoint, SandboxConfig, make_sandbox

    adapter = make_harness(harness)
    key = rig.server.register_rollout(rollout_id)
    src = tmp_path / f"src-{rollout_id}"
    src.mkdir()
    (src / "README.md").write_text("A workspace.\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sb = make_sandbox(SandboxConfig(type="local"), workspace_src=src,
                          proxy=ProxyEndpoint(rig.server.port))
    with sb:
        engine_calls_before = len(rig.engine.calls)
        res = adapter.run(sb, instruction=kit.TASK, proxy_base=f"{sb.proxy_base}/r/{key}", api_key=key,
                          model="smollm2", timeout_s=timeout_s, max_turns=6)
        written = (sb.workspace / "hello.txt").read_text() if (sb.workspace / "hello.txt").exists() else None
    rig.server.close_rollout(key)
    return res, written, len(rig.engine.calls) - engine_calls_before


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_real_harness_fully_captured_with_prefix_property(harness, kit, tmp_path):
    kit.require_installed(harness)
    rig = kit.ProxyRig(harness, tmp_path / "run")
    try:
        captured = []
        for i in range(2):
            rid = f"{harness}-r{i}"
            res, written, engine_calls = _run_local(kit, rig, harness, rid, tmp_path)
            assert res.status == "ok", (res.error, res.stderr_tail[-2000:])
            assert res.final_message == kit.FINAL_ANSWER
            assert written == "hello\n"  # the harness ran the scripted tool call
            calls = rig.calls(rid)
            assert len(calls) >= 2 and len(calls) == engine_calls  # every engine call is in the store
            assert [c.seq for c in calls] == list(range(len(calls)))
            assert all(c.status == "ok" and c.protocol == PROTOCOL[harness] for c in calls)
            assert all(len(c.logprobs) == len(c.sampled_ids) > 0 for c in calls)
            assert kit.prefix_breaks(calls) == []
            captured += calls
        # the two rollouts of the group share the harness prompt up to the first per-run detail
        # (here: the temp workspace path in the system prompt)
        a, b = captured[0].prompt_ids, rig.calls(f"{harness}-r1")[0].prompt_ids
        shared = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        assert shared > 500
        if kit.update_fixtures():
            kit.save_fixture(kit.FIXTURES / f"{harness}.jsonl", captured, harness)
    finally:
        rig.close()


def test_claude_code_prompt_too_long_is_a_clean_harness_error(kit, tmp_path):
    """Claude Code's ~12k-token prompt does not fit SmolLM2's 8192 context: the proxy answers 400
    'too long', Claude Code gives up at once, and the adapter reports a harness error (no hang);
    the runner turns it into the rollout status context_exceeded (its rule, read from the store)."""
    from harnessrl.rollout.jobs import context_refusal

    kit.require_installed("claude-code")
    rig = kit.ProxyRig("claude-code", tmp_path / "run", max_model_len=8192)
    try:
        res, written, engine_calls = _run_local(kit, rig, "claude-code", "too-long", tmp_path, timeout_s=120)
        assert res.status == "harness_error" and "too long" in res.error.lower()
        assert written is None and engine_calls == 0
        calls = rig.calls("too-long")
        assert len(calls) >= 1 and all(c.status == "error" for c in calls)
        assert "too long" in context_refusal(rig.store, "too-long")
    finally:
        rig.close()
