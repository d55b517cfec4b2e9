"""The builtin agent: argument handling, the text format's parsing, its tools, and tools mode end to
end (scripted policy emitting <tool_call> tags through the real proxy)."""

from __future__ import annotations

from harnessrl.engine.scripted import ScriptedEngine
from harnessrl.harness import builtin_agent as agent
from harnessrl.harness.builtin import BuiltinAdapter
from harnessrl.rollout.proxy_link import LocalProxy
from harnessrl.rollout.jobs import RolloutJob, RunOptions, run_rollout
from harnessrl.sandbox.base import SandboxConfig


def test_option_values_may_start_with_a_dash():
    assert agent.glue_values(["--api-key", "-Xy_z", "--max-turns", "3"]) == ["--api-key=-Xy_z", "--max-turns=3"]


def test_bash_block_and_first_messages():
    assert agent.BASH_BLOCK.search("sure\n```bash\necho hi > a.txt\n```\nthat's it").group(1) == "echo hi > a.txt\n"
    assert agent.BASH_BLOCK.search("```\nls\n```").group(1) == "ls\n"
    assert agent.BASH_BLOCK.search("no block here") is None
    msgs = agent.first_messages("bash", "THE TASK")
    assert msgs[0]["role"] == "system" and msgs[-1] == {"role": "user", "content": "THE TASK"}
    assert [m["role"] for m in msgs[1:5]] == ["user", "assistant", "user", "assistant"]
    assert agent.first_messages("tools", "T")[1:] == [{"role": "user", "content": "T"}]


def test_tools(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert "wrote 2 characters" in agent.call_tool("write_file", {"path": "d/a.txt", "content": "hi"})
    assert agent.call_tool("read_file", {"path": "d/a.txt"}) == "hi"
    assert agent.call_tool("list_files", {"path": "d"}) == "a.txt"
    assert agent.call_tool("run_shell", {"command": "cat d/a.txt; exit 3"}) == "exit code 3\nhi"
    assert agent.call_tool("read_file", {"path": "missing"}).startswith("error:")
    assert agent.call_tool("nope", {}).startswith("unknown tool")


def test_tools_format_end_to_end(renderer, store, tasks):
    from harnessrl.proxy.server import ProxyServer

    task = tasks[0]  # the first write_word task (its word and file are in its metadata)
    word, name = task.metadata["word"], task.metadata["file"]
    call = f'<tool_call>\n{{"name": "write_file", "arguments": {{"path": "{name}", "content": "{word}"}}}}\n</tool_call>'
    def reply(prompt_ids):  # first a tool call, then (after the tool result) a final answer
        prompt = renderer.decode(prompt_ids)
        text = "It is written." if "wrote" in prompt else call
        return renderer.encode(text) + [renderer.eot_id]

    engine = ScriptedEngine(reply, eos_ids=renderer.stop_ids)
    server = ProxyServer(engine, store, renderer).start()
    try:
        rec = run_rollout(RolloutJob(task, "builtin", "g-tools", 0), BuiltinAdapter(extra_args=("--format", "tools")),
                          LocalProxy(server), store, RunOptions(sandbox_cfg=SandboxConfig(type="local"), max_turns=4))
    finally:
        server.stop()
    assert (rec.status, rec.reward, rec.call_count) == ("ok", 1.0, 2), rec.error
    assert rec.meta["final_message"] == "It is written."
    assert rec.meta["harness_meta"]["stop"] == "final"
