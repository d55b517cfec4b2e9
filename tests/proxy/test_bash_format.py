"""The "bash" tool format through the real proxy over loopback, with the real SDKs: a scripted engine
writes fenced ```bash blocks and each protocol hands back the harness's own shell-tool call
(Claude Code `Bash`, OpenClaw `exec`, mini-swe-agent `bash`, Codex `exec_command` / argv `shell`)."""

from __future__ import annotations

import json
from pathlib import Path

import anthropic
import openai
import pytest

from harnessrl.proxy.server import ProxyServer
from harnessrl.render.bash_format import INSTRUCTION

from .fakes import TextScriptEngine
from .helpers import assert_call_ok, assert_prefix_chain

SCHEMAS = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "harness_tool_schemas.json").read_text())
REPLIES = ["I will list the files.\n```bash\nls -la\n```", "```bash\nwc -l a.txt\n```", "a.txt has 3 lines."]


@pytest.fixture(scope="module")
def bash_renderer():
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.render.renderer import Renderer

    return Renderer.from_pretrained(smollm2_tokenizer_dir(), tool_format="bash")


@pytest.fixture
def engine(bash_renderer):
    return TextScriptEngine(bash_renderer.encode, bash_renderer.eot_id)


@pytest.fixture
def bash_proxy(engine, store, bash_renderer):
    server = ProxyServer(engine, store, bash_renderer).start()
    yield server
    server.stop()


def _check_store(store, rollout: str, protocol: str, renderer, n: int = 3) -> list:
    calls = store.list_calls([rollout], include_raw=True)
    assert len(calls) == n
    for c in calls:
        assert_call_ok(c)
        assert c.protocol == protocol
        prompt = renderer.decode(c.prompt_ids)
        assert INSTRUCTION in prompt and "<tools>" not in prompt  # the short instruction, not the JSON list
    assert_prefix_chain(calls)  # call k+1 extends call k's prompt + sampled ids
    assert [renderer.decode(c.sampled_ids[:-1]) for c in calls] == REPLIES[:n]  # the sampled text, as sampled
    return calls


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_claude_code_bash(bash_proxy, engine, store, bash_renderer, stream):
    engine.replies.extend(REPLIES)
    key = bash_proxy.register_rollout("cc")
    client = anthropic.Anthropic(base_url=bash_proxy.base_urls(key)["anthropic"], api_key="x", max_retries=0)
    tools = [{"name": t["name"], "description": "", "input_schema": t["parameters"]} for t in SCHEMAS["claude-code"]]
    messages: list[dict] = [{"role": "user", "content": "How many lines are in a.txt?"}]
    results = ["a.txt\nb.txt", "Exit code 0\n3 a.txt"]
    for turn in range(3):
        kwargs = dict(model="claude-opus-5-5", max_tokens=200, system="You are Claude Code.", tools=tools,
                      messages=messages)
        if stream:
            with client.messages.stream(**kwargs) as s:
                msg = s.get_final_message()
        else:
            msg = client.messages.create(**kwargs)
        uses = [b for b in msg.content if b.type == "tool_use"]
        texts = [b.text for b in msg.content if b.type == "text"]
        if turn == 0:
            assert msg.stop_reason == "tool_use" and texts == ["I will list the files."]
            assert [(u.name, u.input) for u in uses] == [("Bash", {"command": "ls -la"})]
        elif turn == 1:
            assert texts == [] and [(u.name, u.input) for u in uses] == [("Bash", {"command": "wc -l a.txt"})]
        else:
            assert msg.stop_reason == "end_turn" and uses == [] and texts == ["a.txt has 3 lines."]
        messages.append({"role": "assistant", "content": [
            b.model_dump(exclude_none=True, exclude={"caller", "citations"}) for b in msg.content]})
        if uses:
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": uses[0].id, "content": results[turn], "is_error": False}]})
    calls = _check_store(store, "cc", "anthropic.messages", bash_renderer)
    assert "Output:\n```\na.txt\nb.txt\n```" in bash_renderer.decode(calls[1].prompt_ids)


@pytest.mark.parametrize("harness, stream", [("openclaw", True), ("mini-swe-agent", False)])
def test_openai_chat_exec_and_bash(bash_proxy, engine, store, bash_renderer, harness, stream):
    engine.replies.extend(REPLIES)
    key = bash_proxy.register_rollout(harness)
    client = openai.OpenAI(base_url=bash_proxy.base_urls(key)["openai"], api_key="x", max_retries=0)
    tools = [{"type": "function", "function": {"name": t["name"], "description": "", "parameters": t["parameters"]}}
             for t in SCHEMAS[harness]]
    shell = {"openclaw": ("exec", "command"), "mini-swe-agent": ("bash", "command")}[harness]
    results = {"openclaw": ["a.txt", "3 a.txt"],
               "mini-swe-agent": ['{"returncode": 0, "output": "a.txt\\n"}', '{"returncode": 0, "output": "3 a.txt\\n"}']}
    messages: list[dict] = [{"role": "system", "content": "You are an agent."},
                            {"role": "user", "content": "How many lines are in a.txt?"}]
    for turn in range(3):
        kwargs = dict(model="policy", messages=messages, tools=tools, max_tokens=200)
        if stream:
            calls: dict[int, dict] = {}
            content, finish = "", None
            for chunk in client.chat.completions.create(stream=True, **kwargs):
                for choice in chunk.choices:
                    content += choice.delta.content or ""
                    finish = choice.finish_reason or finish
                    for tc in choice.delta.tool_calls or []:
                        slot = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                        slot["id"] += tc.id or ""
                        slot["name"] += (tc.function.name or "") if tc.function else ""
                        slot["arguments"] += (tc.function.arguments or "") if tc.function else ""
            got = [calls[i] for i in sorted(calls)]
        else:
            resp = client.chat.completions.create(**kwargs)
            m = resp.choices[0].message
            content, finish = m.content or "", resp.choices[0].finish_reason
            got = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in m.tool_calls or []]
        parsed = [(c["name"], json.loads(c["arguments"])) for c in got]
        if turn < 2:
            command = ["ls -la", "wc -l a.txt"][turn]
            assert finish == "tool_calls" and parsed == [(shell[0], {shell[1]: command})]
            assert content == ("I will list the files." if turn == 0 else "")
        else:
            assert finish == "stop" and got == [] and content == "a.txt has 3 lines."
        # resend as the harness does: compact arguments, OpenClaw strips the ids' non-alphanumerics
        ids = [c["id"].replace("_", "") if harness == "openclaw" else c["id"] for c in got]
        messages.append({"role": "assistant", "content": content or None, "tool_calls": [
            {"id": i, "type": "function", "function": {"name": c["name"], "arguments": json.dumps(a, separators=(",", ":"))}}
            for i, c, (_, a) in zip(ids, got, parsed)]} if got else {"role": "assistant", "content": content})
        for i in ids:
            messages.append({"role": "tool", "tool_call_id": i, "content": results[harness][turn]})
    stored = _check_store(store, harness, "openai.chat", bash_renderer)
    if harness == "mini-swe-agent":
        assert "Exit code 0. Output:\n```\na.txt\n```" in bash_renderer.decode(stored[1].prompt_ids)


@pytest.mark.parametrize("harness", ["codex", "codex-shell"])
def test_responses_codex_exec_command(bash_proxy, engine, store, bash_renderer, harness):
    engine.replies.extend(REPLIES)
    key = bash_proxy.register_rollout(harness)
    client = openai.OpenAI(base_url=bash_proxy.base_urls(key)["responses"], api_key="x", max_retries=0)
    tools = [{"type": "function", "name": t["name"], "description": "", "strict": False, "parameters": t["parameters"]}
             for t in SCHEMAS[harness]]
    tools.append({"type": "custom", "name": "apply_patch", "description": "Apply a patch",
                  "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}})
    inputs: list[dict] = [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "You are Codex."}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Count the lines of a.txt."}]}]
    out_text = "Chunk ID: 1\nWall time: 0.0 seconds\nProcess exited with code 0\nOriginal token count: 2\nOutput:\n{}\n"
    for turn in range(3):
        with client.responses.stream(model="m", input=inputs, tools=tools, tool_choice="auto",
                                     parallel_tool_calls=True, store=False) as s:
            resp = s.get_final_response()
        calls = [o for o in resp.output if o.type == "function_call"]
        if turn < 2:
            command = ["ls -la", "wc -l a.txt"][turn]
            want = {"cmd": command} if harness == "codex" else {"command": ["bash", "-lc", command]}
            assert [(c.name, json.loads(c.arguments)) for c in calls] == [(tools[0]["name"], want)]
        else:
            assert calls == [] and resp.output_text == "a.txt has 3 lines."
        inputs += [dict(reversed(list(o.model_dump(exclude_none=True).items()))) for o in resp.output]
        for c in calls:
            inputs.append({"type": "function_call_output", "call_id": c.call_id,
                           "output": out_text.format(["a.txt", "3 a.txt"][turn])})
    stored = _check_store(store, harness, "openai.responses", bash_renderer)
    assert "Exit code 0. Output:\n```\na.txt\n```" in bash_renderer.decode(stored[1].prompt_ids)


def test_no_shell_tool_means_no_call(bash_proxy, engine, store, bash_renderer):
    """Tools without a shell tool: the template's default format; a ```bash block is plain text."""
    engine.replies.extend(["```bash\nls\n```", '<tool_call>\n{"name": "read", "arguments": {"path": "a"}}\n</tool_call>'])
    key = bash_proxy.register_rollout("noshell")
    client = openai.OpenAI(base_url=bash_proxy.base_urls(key)["openai"], api_key="x", max_retries=0)
    tools = [{"type": "function", "function": {"name": "read", "parameters": {
        "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
    msgs = [{"role": "user", "content": "Read a."}]
    first = client.chat.completions.create(model="m", messages=msgs, tools=tools, max_tokens=50)
    assert first.choices[0].finish_reason == "stop" and not first.choices[0].message.tool_calls
    assert first.choices[0].message.content == "```bash\nls\n```"
    second = client.chat.completions.create(model="m", messages=msgs, tools=tools, max_tokens=50)
    assert [(c.function.name, json.loads(c.function.arguments)) for c in second.choices[0].message.tool_calls] == [
        ("read", {"path": "a"})]
    [c1, _] = store.list_calls(["noshell"])
    prompt = bash_renderer.decode(c1.prompt_ids)
    assert "<tools>" in prompt and INSTRUCTION not in prompt
