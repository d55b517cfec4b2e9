"""The real SmolLM2-135M-Instruct (HF engine) drives the real Claude Code, Codex and OpenClaw (their
`small` profiles) inside bwrap through the `bash_examples` tool format (the one the shipped configs
use: the `bash` instruction plus three worked examples as earlier turns): the model writes a fenced ```bash
block, the proxy turns it into the harness's own shell-tool call, the harness runs it and sends the
output back. Asserted per harness: within a few rollouts of a trivial task, at least one shell call
that came from the model was executed by the harness (its result, under the same call id, is in the
harness's next request), and every call of every rollout is in the store (contiguous seqs, sampled
ids with one logprob each). The model is random-ish, hence a fixed engine seed, a task that names
its command, and up to ATTEMPTS rollouts; each rollout is bounded by its time limit."""

from __future__ import annotations

import re
from typing import Any

import pytest

from harnessrl.harness import make_harness

pytestmark = [pytest.mark.harness, pytest.mark.model, pytest.mark.bwrap, pytest.mark.timeout(3600)]
MAX_TOKENS = 48  # HF generate on 2 shared cores: keep each reply short
ATTEMPTS = 4
TASK = "Create the file hello.txt that contains the word hello. Run this command:\necho hello > hello.txt"
SPECS = ["claude-code:small", "codex:small", "openclaw:small"]


@pytest.fixture(scope="module")
def bash_rig(tmp_path_factory):
    from harnessrl.engine.hf import HFEngine
    from harnessrl.engine.model import resolve_model
    from harnessrl.proxy.server import ProxyServer
    from harnessrl.proxy.serving import ServingPolicy
    from harnessrl.render.renderer import Renderer
    from harnessrl.store import RunStore

    model_dir = resolve_model(None)
    engine = HFEngine(str(model_dir), max_model_len=8192, num_threads=2, seed=0)
    store = RunStore(tmp_path_factory.mktemp("run"))
    renderer = Renderer.from_pretrained(model_dir, tool_format="bash_examples")
    server = ProxyServer(engine, store, renderer, policy=ServingPolicy(
        max_tokens=MAX_TOKENS, max_tokens_cap=MAX_TOKENS, default_temperature=0.7)).start()
    yield server, store
    server.stop()
    engine.close()


def _norm(call_id: Any) -> str:
    """OpenClaw resends call ids without their non-alphanumerics (call_ab-1 -> callab1)."""
    return re.sub(r"[^A-Za-z0-9]", "", str(call_id or ""))


def tool_calls_of(response: dict | None) -> list[tuple[str, str]]:
    """(call id, tool name) of the tool calls in a stored reply, any of the three protocols."""
    if not isinstance(response, dict):
        return []
    out = []
    for block in response.get("content") or []:  # Anthropic Messages
        if isinstance(block, dict) and block.get("type") == "tool_use":
            out.append((block.get("id"), block.get("name")))
    for choice in response.get("choices") or []:  # Chat Completions
        for call in (choice.get("message") or {}).get("tool_calls") or []:
            out.append((call.get("id"), (call.get("function") or {}).get("name")))
    for item in response.get("output") or []:  # Responses
        if isinstance(item, dict) and item.get("type") == "function_call":
            out.append((item.get("call_id"), item.get("name")))
    return [(_norm(i), str(n)) for i, n in out]


def tool_results_in(request: dict | None) -> set[str]:
    """Call ids whose results a request carries back to the model."""
    if not isinstance(request, dict):
        return set()
    ids = set()
    for m in request.get("messages") or []:
        if not isinstance(m, dict):
            continue
        if m.get("role") == "tool":
            ids.add(m.get("tool_call_id"))
        if isinstance(m.get("content"), list):
            ids |= {b.get("tool_use_id") for b in m["content"] if isinstance(b, dict) and b.get("type") == "tool_result"}
    for item in request.get("input") or []:
        if isinstance(item, dict) and item.get("type") in ("function_call_output", "custom_tool_call_output"):
            ids.add(item.get("call_id"))
    return {_norm(i) for i in ids if i}


def executed_calls(calls) -> list[tuple[str, str]]:
    """Tool calls the model made (converted from its bash block) whose results came back later."""
    done = []
    for k, call in enumerate(calls):
        later = set().union(*(tool_results_in(c.request) for c in calls[k + 1:])) if k + 1 < len(calls) else set()
        done += [(i, n) for i, n in tool_calls_of(call.response) if i in later]
    return done


def _one_rollout(server, store, adapter, rid: str, tmp_path):
    from harnessrl.sandbox import ProxyEndpoint, SandboxConfig, SandboxUnavailable, make_sandbox

    key = server.register_rollout(rid)
    src = tmp_path / f"ws-{rid}"
    src.mkdir()
    (src / "notes.txt").write_text("apple\n")
    cfg = SandboxConfig(type="bwrap", extra_ro_binds=[str(p) for p in adapter.ro_paths()])
    try:
        sb = make_sandbox(cfg, workspace_src=src, proxy=ProxyEndpoint(server.port, key=key))
    except SandboxUnavailable as e:
        pytest.skip(f"bwrap is not usable here: {e}")
    with sb:
        res = adapter.run(sb, instruction=TASK, proxy_base=f"{sb.proxy_base}/r/{key}", api_key=key,
                          model="smollm2", timeout_s=420, max_turns=2)
        hello = sb.workspace / "hello.txt"
        written = hello.read_text() if hello.exists() else None
    server.close_rollout(key)
    calls = sorted(store.list_calls([rid], include_raw=True), key=lambda c: c.seq)
    return res, calls, written


@pytest.mark.parametrize("spec", SPECS)
def test_small_model_runs_shell_calls_through_real_harness(spec, bash_rig, kit, tmp_path):
    kit.require_installed(spec.split(":")[0])
    server, store = bash_rig
    adapter = make_harness(spec)
    tried = []
    for attempt in range(ATTEMPTS):
        rid = f"{spec}-bash-{attempt}"
        res, calls, written = _one_rollout(server, store, adapter, rid, tmp_path)
        # whatever the model did, the run ended with a reported status and every call is stored
        assert res.status in ("ok", "harness_error", "timeout"), (res.status, res.error)
        assert calls, (spec, res.status, res.error, res.stderr_tail[-1500:])
        assert [c.seq for c in calls] == list(range(len(calls)))
        for c in calls:
            assert c.status == "ok", (c.meta.get("error_kind"), c.meta.get("error"))
            assert 0 < len(c.sampled_ids) <= MAX_TOKENS and len(c.logprobs) == len(c.sampled_ids)
        done = executed_calls(calls)
        tried.append((res.status, len(calls), done, written))
        if done:
            shell = {"claude-code": "Bash", "codex": "exec_command", "openclaw": "exec"}[spec.split(":")[0]]
            assert all(name == shell for _, name in done), done
            return
    pytest.fail(f"{spec}: no shell call executed in {ATTEMPTS} rollouts: {tried}")


@pytest.mark.parametrize("spec", SPECS)
def test_bash_block_becomes_an_executed_call_scripted(spec, kit, tmp_path):
    """The same path with a scripted policy (no model weights): the policy writes a ```bash block, the
    harness runs it (the file appears in the workspace) and the detection above sees the executed call."""
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.engine.scripted import ScriptedEngine
    from harnessrl.proxy.server import ProxyServer
    from harnessrl.render.renderer import Renderer
    from harnessrl.store import RunStore

    kit.require_installed(spec.split(":")[0])
    renderer = Renderer.from_pretrained(smollm2_tokenizer_dir(), tool_format="bash")
    tok, stop = renderer.tokenizer, renderer.stop_ids[0]

    def policy(prompt_ids):
        replied_before = tok.decode(prompt_ids).count("<|im_start|>assistant") > 1  # + the generation prompt
        text = "Done." if replied_before else "I will write it.\n```bash\necho hello > hello.txt\n```"
        return tok.encode(text, add_special_tokens=False) + [stop]

    store = RunStore(tmp_path / "run")
    server = ProxyServer(ScriptedEngine(policy, max_model_len=1 << 17), store, renderer).start()
    try:
        res, calls, written = _one_rollout(server, store, make_harness(spec), f"{spec}-scripted", tmp_path)
    finally:
        server.stop()
    assert written == "hello\n", (res.status, res.error, res.stderr_tail[-1500:])
    shell = {"claude-code": "Bash", "codex": "exec_command", "openclaw": "exec"}[spec.split(":")[0]]
    done = executed_calls(calls)
    assert done and {n for _, n in done} == {shell}, [c.response for c in calls]
    assert [c.seq for c in calls] == list(range(len(calls))) and all(c.status == "ok" for c in calls)


@pytest.mark.parametrize("spec", ["codex:small", "openclaw:small"])
def test_harness_without_a_turn_limit_stops_at_the_call_budget(spec, kit, tmp_path):
    """`codex exec` (and OpenClaw) have no turn limit: a policy that never stops running commands kept it busy until
    the rollout's time limit (400 s rollouts in the learning runs). With the proxy's call budget
    (max_turns model calls per rollout key) its next call gets a typed 400 and Codex ends; the
    rollout is the policy's end, scored by the verifier."""
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.engine.scripted import ScriptedEngine
    from harnessrl.rollout.jobs import run_groups
    from harnessrl.proxy.server import ProxyServer
    from harnessrl.render.renderer import Renderer
    from harnessrl.sandbox import SandboxConfig
    from harnessrl.store import RunStore
    from harnessrl.tasks import load_tasks

    kit.require_installed(spec.split(":")[0])
    renderer = Renderer.from_pretrained(smollm2_tokenizer_dir(), tool_format="bash")
    tok, stop = renderer.tokenizer, renderer.stop_ids[0]

    def policy(prompt_ids):  # never done: one more command every time
        return tok.encode("```bash\necho again >> log.txt\n```", add_special_tokens=False) + [stop]

    store = RunStore(tmp_path / "run")
    server = ProxyServer(ScriptedEngine(policy, max_model_len=1 << 17), store, renderer).start()
    try:
        task = load_tasks("builtin:write_word:test")[0]
        [rec] = run_groups([task], [spec], 1, proxy=server, store=store, sandbox_cfg=SandboxConfig(type="bwrap"),
                           concurrency=1, max_turns=3, harness_timeout_s=300, start_retries=0, progress=False)
    finally:
        server.stop()
    calls = sorted(store.list_calls([rec.rollout_id]), key=lambda c: c.seq)
    assert [c.status for c in calls] == ["ok", "ok", "ok", "error"], [(c.status, c.meta.get("error")) for c in calls]
    assert calls[-1].meta["error_kind"] == "call_budget"
    assert rec.status == "ok" and rec.meta["end_reason"] == "call_budget" and rec.reward is not None, rec.error
    assert rec.durations["harness_s"] < 300  # it ended on the 400, not on the time limit
