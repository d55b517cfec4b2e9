"""End-to-end (issue 3): each REAL harness runs inside a real bwrap sandbox against the real proxy
(bridged into the sandbox's network namespace), with a scripted policy where the small model
cannot drive the harness. Checks: status ok, the harness's calls are in the store under the
rollout, the scripted tool call changed the workspace, and a hang is killed at its limit.
HARNESSRL_UPDATE_FIXTURES=1 also saves the calls to tests/fixtures/harness_calls/<harness>.jsonl
for the harnesses the proxy test does not cover."""

from __future__ import annotations

import pytest

from harnessrl.harness import make_harness

pytestmark = [pytest.mark.harness, pytest.mark.bwrap, pytest.mark.timeout(1200)]

HARNESSES = ["builtin", "mini-swe-agent", "claude-code", "codex", "openclaw", "openclaw:gateway", "qwen-code:small",
             "opencode:small", "command"]
# openclaw:gateway = `openclaw gateway` + one chat turn (the gateway takes ~15-30 s to get ready)
TOOL_LOOP = {"builtin", "mini-swe-agent", "claude-code", "codex", "openclaw", "qwen-code", "opencode"}  # >= 2 calls
EXACT_PREFIX = {"builtin", "mini-swe-agent", "claude-code", "codex"}
SAVE = {"builtin", "mini-swe-agent", "openclaw"}


def _bwrap_sandbox(adapter, workspace_src, port, key):
    from harnessrl.sandbox import ProxyEndpoint, SandboxConfig, SandboxUnavailable, make_sandbox

    from harnessrl.rollout.jobs import sandbox_config_for

    cfg = sandbox_config_for(SandboxConfig(type="bwrap"), adapter)  # the runner's path: ro binds, memory floor
    try:
        return make_sandbox(cfg, workspace_src=workspace_src, proxy=ProxyEndpoint(port, key=key))
    except SandboxUnavailable as e:
        pytest.skip(f"bwrap is not usable here: {e}")


@pytest.mark.parametrize("harness", HARNESSES)
def test_real_harness_in_bwrap(harness, kit, tmp_path):
    name = harness.split(":")[0]
    if name != "command":
        kit.require_installed(name)
    rig = kit.ProxyRig(name, tmp_path / "run")
    try:
        adapter = make_harness(kit.harness_spec(harness))
        src = tmp_path / "workspace"
        src.mkdir()
        (src / "README.md").write_text("Task files live here.\n")
        rid = f"{harness.replace(':', '-')}-bwrap-0"
        key = rig.server.register_rollout(rid)
        other = rig.server.register_rollout("someone-else")
        with _bwrap_sandbox(adapter, src, rig.server.port, key) as sb:
            res = adapter.run(sb, instruction=kit.TASK, proxy_base=f"{sb.proxy_base}/r/{key}", api_key=key,
                              model="smollm2", timeout_s=600, max_turns=6)
            hello = sb.workspace / "hello.txt"
            written = hello.read_text() if hello.exists() else None
        assert res.status == "ok", (res.error, res.stdout_tail[-1500:], res.stderr_tail[:1500], res.stderr_tail[-1000:])
        calls = rig.calls(rid)
        assert calls and all(c.status == "ok" for c in calls)
        assert len(calls) == len(rig.engine.calls)  # nothing went elsewhere, nothing was lost
        assert rig.store.count_calls("someone-else") == 0 and other
        if name in TOOL_LOOP:
            assert len(calls) >= 2 and written == "hello\n", str(rig.store.list_calls([rid], include_raw=True)[-1].request["messages"][-1])[:700]
            assert res.final_message in (kit.FINAL_ANSWER, "")  # mini-swe-agent submits an empty output
        else:  # the command 'harness' writes the model's reply
            assert written == "hello\n" and res.final_message == "hello"
        if name in EXACT_PREFIX:
            assert kit.prefix_breaks(calls) == []
        if kit.update_fixtures() and harness in SAVE:
            kit.save_fixture(kit.FIXTURES / f"{harness}.jsonl", calls, harness)
    finally:
        rig.close()


def test_hanging_harness_is_killed_with_its_tree_in_bwrap(tmp_path):
    adapter = make_harness("command:sleep 1000 & setsid sleep 1000 & (sleep 1000 &) ; sleep 1000")
    from harnessrl.sandbox import SandboxConfig, SandboxUnavailable, make_sandbox

    src = tmp_path / "ws"
    src.mkdir()
    try:
        sb = make_sandbox(SandboxConfig(type="bwrap"), workspace_src=src)
    except SandboxUnavailable as e:
        pytest.skip(f"bwrap is not usable here: {e}")
    with sb:
        res = adapter.run(sb, instruction="hang", proxy_base="http://127.0.0.1:9/r/x", api_key="x",
                          model="m", timeout_s=3, max_turns=1)
        assert res.status == "timeout" and res.exit_code == 124
        # before destroy: no sleep survives inside the sandbox
        ps = sb.run(["sh", "-c", "cat /proc/[0-9]*/comm 2>/dev/null | grep -cx sleep"], timeout_s=30)
        assert ps.stdout.strip() == "0", ps
        assert "killed" in res.stderr_tail
