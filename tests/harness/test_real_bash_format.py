"""The `bash` tool format with the REAL harnesses (Claude Code, Codex, OpenClaw, mini-swe-agent in tool
mode; local sandbox, temp dir): a scripted policy writes
one fenced ```bash block, the proxy turns it into the harness's own shell-tool call (found from
the tool schemas in its request), the harness runs it, and the policy then answers without a
block. Asserts: the harness ran the command, every call is captured, the prefix property holds,
the prompt carries the bash format's instruction instead of the JSON tool list, and the tool result
came back rendered as an output block."""

from __future__ import annotations

import warnings

import pytest

from harnessrl.harness import make_harness
from harnessrl.render.bash_format import INSTRUCTION

pytestmark = [pytest.mark.harness, pytest.mark.timeout(900)]

BLOCK = "I will write the file.\n```bash\necho hello > hello.txt\n```"
FINAL = "Done: wrote hello.txt."
# mini-swe-agent (tool mode, as shipped) ends the task when a command prints this line
FINALS = {"mini-swe-agent:tool": "```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```",
          "mini-swe-agent:tool-small": "```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"}
SHELL_CALL = {"claude-code": ("anthropic.messages", "Bash", "command"),
              "codex": ("openai.responses", "exec_command", "cmd"),
              "openclaw": ("openai.chat", "exec", "command"),
              "mini-swe-agent:tool": ("openai.chat", "bash", "command"),
              "mini-swe-agent:tool-small": ("openai.chat", "bash", "command")}


class DialectRig:
    def __init__(self, run_dir, final_text: str = FINAL):
        from harnessrl.engine.model import resolve_model
        from harnessrl.engine.scripted import ScriptedEngine
        from harnessrl.proxy.server import ProxyServer
        from harnessrl.render.renderer import Renderer
        from harnessrl.store import RunStore

        model_dir = resolve_model(None)
        self.renderer = r = Renderer.from_pretrained(model_dir, tool_format="bash")
        block, final = r.encode(BLOCK) + [r.stop_ids[0]], r.encode(final_text) + [r.stop_ids[0]]

        def policy(prompt_ids: list[int]) -> list[int]:
            # answered once the output block of our command follows our last reply
            # (OpenClaw appends a context turn after it, so look at everything since that reply)
            since = r.decode(prompt_ids).rsplit("<|im_start|>assistant", 2)
            return final if len(since) == 3 and "Output:\n```" in since[-2] else block

        self.engine = ScriptedEngine(policy, max_model_len=131072, model_path=str(model_dir))
        self.store = RunStore(run_dir)
        self.server = ProxyServer(self.engine, self.store, r).start()


@pytest.mark.parametrize("harness", ["claude-code", "codex", "openclaw", "mini-swe-agent:tool",
                                     "mini-swe-agent:tool-small"])
def test_real_harness_runs_the_bash_block(harness, kit, tmp_path):
    from harnessrl.sandbox import ProxyEndpoint, SandboxConfig, make_sandbox

    kit.require_installed(harness.split(":")[0])
    rig = DialectRig(tmp_path / "run", FINALS.get(harness, FINAL))
    try:
        key = rig.server.register_rollout("r0")
        src = tmp_path / "src"
        src.mkdir()
        (src / "README.md").write_text("A workspace.\n")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sb = make_sandbox(SandboxConfig(type="local"), workspace_src=src, proxy=ProxyEndpoint(rig.server.port))
        with sb:
            res = make_harness(harness).run(sb, instruction=kit.TASK, proxy_base=f"{sb.proxy_base}/r/{key}",
                                            api_key=key, model="smollm2", timeout_s=400, max_turns=6)
            written = (sb.workspace / "hello.txt").read_text() if (sb.workspace / "hello.txt").exists() else None
        rig.server.close_rollout(key)
        assert res.status == "ok", (res.error, res.stderr_tail[-2000:])
        assert written == "hello\n"  # the harness ran the block as its own shell tool
        calls = sorted(rig.store.list_calls(["r0"], include_raw=True), key=lambda c: c.seq)
        protocol, tool, prop = SHELL_CALL[harness]
        assert len(calls) >= 2 and all(c.status == "ok" and c.protocol == protocol for c in calls)
        first = rig.renderer.decode(calls[0].prompt_ids)
        assert INSTRUCTION in first and "<tools>" not in first
        response = calls[0].response
        if protocol == "anthropic.messages":
            got = [(b["name"], b["input"]) for b in response["content"] if b["type"] == "tool_use"]
        elif protocol == "openai.responses":
            import json

            got = [(o["name"], json.loads(o["arguments"])) for o in response["output"] if o["type"] == "function_call"]
        else:
            import json

            got = [(t["function"]["name"], json.loads(t["function"]["arguments"]))
                   for t in response["choices"][0]["message"]["tool_calls"]]
        assert got == [(tool, {prop: "echo hello > hello.txt"})]
        answered = [c for c in calls if "Output:\n```" in rig.renderer.decode(c.prompt_ids)]
        assert answered, "no request carried the command's output as an output block"
        if harness != "openclaw":  # OpenClaw drops its per-request context turn: no token prefix
            assert kit.prefix_breaks(calls) == []
    finally:
        rig.server.stop()
