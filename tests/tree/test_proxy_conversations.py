"""Trees of Claude-Code- and Codex-shaped conversations recorded by the real proxy.

The requests follow what docs/harnesses.md describes of the real harnesses: the whole history is
resent every turn, equal in meaning but not byte-identical (Claude Code: the inline system message
turns from a block list into a string, cache_control moves to the newest block, tool input is
re-serialised; Codex: output items come back with keys re-ordered and reasoning content null).
Real proxy on loopback, real renderer and tokenizer, scripted engine. A group of rollouts must give
one tree whose every conversation is one path with no within-rollout branch.
"""

from __future__ import annotations

import json

import httpx
import pytest

from harnessrl.algo import decision_counts, grpo
from harnessrl.store import RunStore
from harnessrl.tree import build_tree
from tests.support.synthetic import make_rollout

WITHIN_ROLLOUT = {"retry", "parallel", "restart", "rewrite"}


def tool_call_text(name: str, args: dict) -> str:
    return f'<tool_call>\n{json.dumps({"name": name, "arguments": args})}\n</tool_call>\n'


@pytest.fixture(scope="module")
def renderer():
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.render.renderer import Renderer

    return Renderer.from_pretrained(smollm2_tokenizer_dir())


@pytest.fixture
def recorded(tmp_path, renderer):
    """(store, proxy, script) where script is the engine's reply queue of token ids."""
    from harnessrl.engine.scripted import ScriptedEngine
    from harnessrl.proxy.server import ProxyServer

    script: list[list[int]] = []
    engine = ScriptedEngine(lambda _prompt: script.pop(0), eos_ids=[renderer.eot_id])
    store = RunStore(tmp_path / "run")
    proxy = ProxyServer(engine, store, renderer).start()
    yield store, proxy, lambda text: script.append(renderer.encode(text) + [renderer.eot_id])
    proxy.stop()
    store.close()


def claude_code_rollout(proxy, rid: str, commands: list[str]) -> None:
    base = proxy.base_urls(proxy.register_rollout(rid))["anthropic"]
    system = [{"type": "text", "text": "You are Claude Code, a coding agent."},
              {"type": "text", "text": "Use the tools. Be brief.", "cache_control": {"type": "ephemeral"}}]
    tools = [{"name": "Bash", "description": "Run a shell command",
              "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}]
    env_blocks = [{"type": "text", "text": "Environment: cwd=/work, platform=linux"}]
    messages = [{"role": "user", "content": [{"type": "text", "text": "Count the files.",
                                              "cache_control": {"type": "ephemeral"}}]},
                {"role": "system", "content": env_blocks}]
    for turn in range(len(commands) + 1):
        r = httpx.post(f"{base}/v1/messages", timeout=30, json={
            "model": "claude-opus-5-5", "max_tokens": 256, "system": system, "tools": tools,
            "messages": messages, "thinking": {"type": "adaptive"}})
        assert r.status_code == 200, r.text
        content = r.json()["content"]
        # resend: the inline system message becomes a string, cache_control moves to the newest block
        messages[1] = {"role": "system", "content": env_blocks[0]["text"]}
        for m in messages:
            if isinstance(m["content"], list):
                for b in m["content"]:
                    b.pop("cache_control", None)
        messages.append({"role": "assistant", "content": [
            {**b, "input": json.loads(json.dumps(b["input"], separators=(",", ":")))} if b["type"] == "tool_use" else b
            for b in content]})
        uses = [b for b in content if b["type"] == "tool_use"]
        if uses:
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": u["id"], "content": f"{turn + 3} files", "is_error": False,
                 "cache_control": {"type": "ephemeral"}} for u in uses]})


def codex_rollout(proxy, rid: str, commands: list[str]) -> None:
    base = proxy.base_urls(proxy.register_rollout(rid))["responses"]
    tools = [{"type": "function", "name": "exec_command", "description": "Run a command", "strict": False,
              "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}]
    items = [{"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
             {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Count the files."}]}]
    for turn in range(len(commands) + 1):
        r = httpx.post(f"{base}/responses", timeout=30, json={
            "model": "m", "input": items, "tools": tools, "tool_choice": "auto", "parallel_tool_calls": True,
            "store": False, "include": ["reasoning.encrypted_content"]})
        assert r.status_code == 200, r.text
        for out in r.json()["output"]:
            resent = dict(reversed(list(out.items())))  # same values, different key order
            if resent["type"] == "reasoning":
                resent["content"] = None
            items.append(resent)
            if out["type"] == "function_call":
                items.append({"type": "function_call_output", "call_id": out["call_id"], "output": f"{turn} files"})


@pytest.mark.parametrize("harness", ["claude-code", "codex"])
def test_group_of_real_proxy_conversations_is_one_path_each(recorded, harness):
    store, proxy, reply = recorded
    run = claude_code_rollout if harness == "claude-code" else codex_rollout
    plans = {"r0": ["ls", "ls | wc -l"], "r1": ["find . -type f"], "r2": ["ls -la", "wc -l *", "echo done"]}
    for rid, commands in plans.items():
        for k, cmd in enumerate(commands):
            think = "<think>list the files</think>" if k == 0 else ""
            reply(think + tool_call_text("Bash" if harness == "claude-code" else "exec_command",
                                         {"command" if harness == "claude-code" else "cmd": cmd}))
        reply(f"There are {len(commands) + 2} files.")
        run(proxy, rid, commands)
    proxy.flush()  # the delivery marks of the last answers (committed right after they went out)
    calls = store.list_calls(list(plans))
    rollouts = [make_rollout(rid, float(i % 2), harness=harness) for i, rid in enumerate(plans)]
    tree = build_tree(calls, rollouts)
    for rid, commands in plans.items():
        assert len(tree.paths_of(rid)) == 1, f"{rid}: {len(tree.paths_of(rid))} paths"
        assert tree.rollouts[rid].n_calls == len(commands) + 1
    assert not WITHIN_ROLLOUT & set(tree.stats.branch_reasons), tree.stats.branch_reasons
    # nothing re-tokenised: each rollout's completions are exactly the decision tokens on its path
    per_rollout = decision_counts(tree)
    for rid in plans:
        assert per_rollout[rid] == sum(len(c.sampled_ids) for c in calls if c.rollout_id == rid)
    # rollouts that sampled the same first tokens share them: fewer decision tokens than sampled
    assert tree.stats.decision_tokens < sum(len(c.sampled_ids) for c in calls)
    # the system prompt, tools and task are one shared prefix: one root child, shared by all
    assert len(tree.root.children) == 1 and set(tree.nodes[1].rollouts) == set(plans)
    assert tree.stats.per_call_tokens > 2 * tree.stats.unique_tokens
    adv = grpo(tree)
    assert set(adv.rollout_ids) == set(plans) and adv.norm == 3.0
