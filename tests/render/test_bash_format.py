"""The "bash" tool format: shell-tool recognition from schemas, parsing, rendering, round trips,
results in each harness's shape, the no-shell fallback, and exact history with bash-format turns.

tests/fixtures/harness_tool_schemas.json: the tool schemas of the real harnesses' first requests
(Claude Code, Codex, OpenClaw; decoded from tests/fixtures/harness_calls, descriptions dropped; Cline
3.0.65's 25 tools from its `harnessrl harness check` request),
mini-swe-agent's `bash` tool and Codex's older argv `shell` tool (written from their shapes).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnessrl.render.conversation import Conversation
from harnessrl.render.messages import Message, ToolCall, ToolSpec
from harnessrl.render.bash_format import (
    INSTRUCTION,
    command_text,
    extract_commands,
    find_shell_tool,
    render_result,
    result_parts,
)
from harnessrl.store.records import PROMPT

SCHEMAS = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "harness_tool_schemas.json").read_text())
EXPECTED = {"claude-code": ("Bash", "command", "string"), "codex": ("exec_command", "cmd", "string"),
            "openclaw": ("exec", "command", "string"), "mini-swe-agent": ("bash", "command", "string"),
            "codex-shell": ("shell", "command", "argv"), "cline": ("run_commands", "commands", "list")}
NO_SHELL = [ToolSpec("read", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}},
                                              "required": ["path"]}),
            ToolSpec("write", "Write a file.", {"type": "object", "properties": {
                "path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]})]


def harness_tools(name: str) -> list[ToolSpec]:
    return [ToolSpec(t["name"], "", t["parameters"]) for t in SCHEMAS[name]]


@pytest.fixture(scope="module")
def bash_renderer():
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.render.renderer import Renderer

    return Renderer.from_pretrained(smollm2_tokenizer_dir(), tool_format="bash")


@pytest.fixture(scope="module")
def examples_renderer():
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.render.renderer import Renderer

    return Renderer.from_pretrained(smollm2_tokenizer_dir(), tool_format="bash_examples")


@pytest.fixture(scope="module")
def hermes_renderer():
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.render.renderer import Renderer

    return Renderer.from_pretrained(smollm2_tokenizer_dir())


# ---- recognising the shell tool ---------------------------------------------------------------
@pytest.mark.parametrize("harness", sorted(EXPECTED))
def test_shell_tool_found_from_the_real_schemas(harness):
    shell = find_shell_tool(harness_tools(harness))
    assert shell is not None
    assert (shell.name, shell.prop, shell.kind) == EXPECTED[harness]


def test_shell_tool_recognition_rules():
    assert find_shell_tool(NO_SHELL) is None and find_shell_tool([]) is None and find_shell_tool(None) is None

    def tool(name, props, required):
        return ToolSpec(name, "", {"type": "object", "properties": props, "required": required})

    s = {"type": "string"}
    # a required property without a default makes the call unfillable: not a shell tool
    assert find_shell_tool([tool("run", {"command": s, "host": s}, ["command", "host"])]) is None
    # ... with a default it is filled in
    shell = find_shell_tool([tool("run", {"command": s, "host": {"type": "string", "default": "local"}},
                                  ["command", "host"])])
    assert shell is not None and shell.arguments("ls") == {"host": "local", "command": "ls"}
    # required beats optional, whatever the names
    shell = find_shell_tool([tool("bash", {"command": s}, []), tool("zzz", {"cmd": s}, ["cmd"])])
    assert shell.name == "zzz"
    # the name only breaks ties
    shell = find_shell_tool([tool("aaa", {"command": s}, ["command"]), tool("bash", {"command": s}, ["command"])])
    assert shell.name == "bash"
    # custom (free-text) tools and non-string properties never count
    assert find_shell_tool([ToolSpec("x", "", {"type": "object", "properties": {"command": {"type": "integer"}},
                                               "required": ["command"]})]) is None
    assert find_shell_tool([ToolSpec("shell", "", {"format": {}}, kind="custom")]) is None


def test_argv_commands():
    shell = find_shell_tool(harness_tools("codex-shell"))
    assert shell.arguments("ls -la | wc -l") == {"command": ["bash", "-lc", "ls -la | wc -l"]}
    assert command_text(["bash", "-lc", "echo hi"]) == "echo hi"
    assert command_text(["ls", "-la", "my dir"]) == "ls -la 'my dir'"
    assert command_text(7) is None and command_text([]) is None


# ---- parsing ------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, content, command", [
    ("```bash\nls -la\n```", "", "ls -la"),
    ("I will look.\n```sh\nls\n```", "I will look.", "ls"),
    ("```Shell\npwd\n```\nThat prints the directory.", "That prints the directory.", "pwd"),
    ("First:\n```bash\ncd a\n```\nthen\n```bash\nmake\n```\n", "First:\nthen", "cd a\nmake"),  # one script
    ("```bash\nprintf '```'\n```", "", "printf '```'"),  # a fence inside a line is not a close
    ("```\nls\n```", "```\nls\n```", None),  # no language: text
    ("```python\nprint(1)\n```", "```python\nprint(1)\n```", None),
    ("```bash\n\n```", "```bash\n\n```", None),  # empty block: text
    ("no block here", "no block here", None),
])
def test_extract_commands(text, content, command):
    got_content, got_command = extract_commands(text, allow_open=False)
    assert got_command == command
    assert got_content.strip() == content


def test_open_last_block_counts_only_when_the_reply_stopped():
    assert extract_commands("Run:\n```bash\necho hi > a.txt\n", allow_open=True) == ("Run:", "echo hi > a.txt")
    assert extract_commands("Run:\n```bash\necho hi > a", allow_open=False)[1] is None
    assert extract_commands("```bash\nls -la```", allow_open=True) == ("", "ls -la")  # fence on the same line
    assert extract_commands("```bash\n```", allow_open=True) == ("```bash\n```", None)


def test_parse_reply(bash_renderer):
    r = bash_renderer
    tools = harness_tools("claude-code")
    parsed = r.parse(r.encode("I will list.\n```bash\nls -la\n```") + [r.eot_id], tools=tools, id_seed="s")
    assert parsed.content == "I will list." and parsed.finish_reason == "tool_calls"
    [call] = parsed.tool_calls
    assert (call.name, call.arguments) == ("Bash", {"command": "ls -la"})
    # cut by the length limit: an open block is text, not a half command
    cut = r.parse(r.encode("```bash\necho hel"), finish_reason="length", tools=tools)
    assert cut.tool_calls == [] and cut.finish_reason == "length"
    # stopped with the block still open: the command runs
    open_ = r.parse(r.encode("```bash\necho hi > a.txt") + [r.eot_id], tools=tools)
    assert open_.tool_calls[0].arguments == {"command": "echo hi > a.txt"}
    # no block: the final answer
    done = r.parse(r.encode("The file is written.") + [r.eot_id], tools=tools)
    assert done.tool_calls == [] and done.finish_reason == "stop" and done.content == "The file is written."


def test_hermes_tags_still_parse_for_other_tools(bash_renderer):
    r = bash_renderer
    text = '<tool_call>\n{"name": "Read", "arguments": {"file_path": "a.py"}}\n</tool_call>\n```bash\nls\n```'
    parsed = r.parse(r.encode(text) + [r.eot_id], tools=harness_tools("claude-code"))
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("Read", {"file_path": "a.py"}),
                                                                  ("Bash", {"command": "ls"})]


# ---- rendering and round trips ------------------------------------------------------------------
def _assistant_text(r, msg: Message, tools: list[ToolSpec]) -> str:
    """The text of the last assistant turn as the template renders it."""
    text = r.render_text([Message("user", "x"), msg], tools, add_generation_prompt=False)
    start = text.rindex("<|im_start|>assistant\n") + len("<|im_start|>assistant\n")
    return text[start : text.index(r.eot_text, start)]


@pytest.mark.parametrize("harness", sorted(EXPECTED))
@pytest.mark.parametrize("content", ["", "Let me check the files."])
@pytest.mark.parametrize("command", ["ls -la", "cat a.txt | sort -u > b.txt\necho done", "printf '```\\n'"])
def test_round_trip_call_render_parse(bash_renderer, harness, content, command):
    r = bash_renderer
    tools = harness_tools(harness)
    shell = find_shell_tool(tools)
    call = ToolCall("id1", shell.name, shell.arguments(command))
    text = _assistant_text(r, Message("assistant", content, tool_calls=[call]), tools)
    assert "```bash\n" in text and "<tool_call>" not in text
    parsed = r.parse(r.encode(text) + [r.eot_id], tools=tools)
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [(call.name, call.arguments)]
    assert parsed.content == content
    # and the model's text form comes back from the parsed reply
    again = _assistant_text(r, Message("assistant", parsed.content, tool_calls=parsed.tool_calls), tools)
    assert again == text


@pytest.mark.parametrize("text", ["```bash\nls\n```", "I will look first.\n```bash\nls -la\ncat a.txt\n```"])
def test_round_trip_text_parse_render(bash_renderer, text):
    r = bash_renderer
    tools = harness_tools("openclaw")
    parsed = r.parse(r.encode(text) + [r.eot_id], tools=tools)
    assert _assistant_text(r, Message("assistant", parsed.content, tool_calls=parsed.tool_calls), tools) == text


def test_argv_call_renders_as_its_command(bash_renderer):
    tools = harness_tools("codex-shell")
    call = ToolCall("c", "shell", {"command": ["bash", "-lc", "ls -la"], "workdir": "/w"})
    assert _assistant_text(bash_renderer, Message("assistant", "", tool_calls=[call]), tools) == "```bash\nls -la\n```"


def test_other_calls_in_history_fall_back_to_hermes(bash_renderer):
    tools = harness_tools("claude-code")
    calls = [ToolCall("a", "Read", {"file_path": "x.py"}), ToolCall("b", "Bash", {"command": "pytest -q"})]
    text = _assistant_text(bash_renderer, Message("assistant", "Reading.", tool_calls=calls), tools)
    assert text == ('Reading.\n<tool_call>\n{"name": "Read", "arguments": {"file_path": "x.py"}}\n</tool_call>\n'
                    "```bash\npytest -q\n```")
    parsed = bash_renderer.parse(bash_renderer.encode(text) + [bash_renderer.eot_id], tools=tools)
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [(c.name, c.arguments) for c in calls]


def test_system_prompt_is_the_short_instruction(bash_renderer, hermes_renderer):
    tools = harness_tools("claude-code")
    msgs = [Message("system", "You are Claude Code."), Message("user", "List the files.")]
    text = bash_renderer.render_text(msgs, tools)
    assert INSTRUCTION in text and "<tools>" not in text and '"Edit"' not in text
    assert text.startswith("<|im_start|>system\nYou are Claude Code.\n\n" + INSTRUCTION)
    assert len(bash_renderer.render(msgs, tools)) * 10 < len(hermes_renderer.render(msgs, tools))
    # no system message: the instruction is the system turn
    assert bash_renderer.render_text(msgs[1:], tools).startswith("<|im_start|>system\n" + INSTRUCTION)


# ---- tool results ---------------------------------------------------------------------------------
@pytest.mark.parametrize("content, code, output", [
    ("(Bash completed with no output)", None, "(Bash completed with no output)"),  # Claude Code
    ("Exit code 2\nls: cannot access 'x': No such file or directory", 2,
     "ls: cannot access 'x': No such file or directory"),  # Claude Code, failed command
    ("Chunk ID: f633e2\nWall time: 0.0000 seconds\nProcess exited with code 0\nOriginal token count: 1\n"
     "Output:\nhello\n", 0, "hello\n"),  # Codex exec_command
    ("Exit code: 1\nWall time: 0.1 seconds\nOutput:\nboom", 1, "boom"),  # Codex shell (text)
    ('{"output": "a\\n", "metadata": {"exit_code": 0, "duration_seconds": 0.1}}', 0, "a\n"),  # Codex shell (JSON)
    ('{"returncode": 1, "output": "no such file"}', 1, "no such file"),  # mini-swe-agent
    ("(no output)", None, "(no output)"),  # OpenClaw
    ("Output: not a codex result", None, "Output: not a codex result"),
])
def test_result_shapes(content, code, output):
    assert result_parts(content) == (code, output)


def test_result_rendering():
    assert render_result("hello\n") == "Output:\n```\nhello\n```"
    assert render_result('{"returncode": 0, "output": "a.txt\\n"}') == "Exit code 0. Output:\n```\na.txt\n```"
    assert render_result("x = '```'") == "Output:\n````\nx = '```'\n````"  # a longer fence


def test_results_render_as_one_user_turn(bash_renderer):
    tools = harness_tools("codex")
    call = ToolCall("c1", "exec_command", {"cmd": "ls"})
    msgs = [Message("user", "go"), Message("assistant", "", tool_calls=[call]),
            Message("tool", "Process exited with code 0\nOutput:\na.txt\n", tool_call_id="c1")]
    text = bash_renderer.render_text(msgs, tools)
    assert text.endswith("<|im_start|>user\nExit code 0. Output:\n```\na.txt\n```<|im_end|>\n<|im_start|>assistant\n")


# ---- no shell tool ------------------------------------------------------------------------------
def test_no_shell_tool_falls_back_to_the_template_format(bash_renderer, hermes_renderer):
    msgs = [Message("system", "Agent."), Message("user", "Read a.py"),
            Message("assistant", "", tool_calls=[ToolCall("c", "read", {"path": "a.py"})]),
            Message("tool", "x = 1", tool_call_id="c")]
    for tools in (NO_SHELL, []):
        assert bash_renderer.render_text(msgs, tools) == hermes_renderer.render_text(msgs, tools)
    r = bash_renderer
    block = r.parse(r.encode("```bash\nls\n```") + [r.eot_id], tools=NO_SHELL)
    assert block.tool_calls == [] and block.content == "```bash\nls\n```"
    tag = r.parse(r.encode('<tool_call>\n{"name": "read", "arguments": {"path": "b"}}\n</tool_call>') + [r.eot_id],
                  tools=NO_SHELL)
    assert [(c.name, c.arguments) for c in tag.tool_calls] == [("read", {"path": "b"})]
    plain = r.parse(r.encode("```bash\nls\n```") + [r.eot_id], tools=None)
    assert plain.tool_calls == []


def test_unknown_format_is_refused():
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.render.renderer import Renderer
    from harnessrl.render.template import TemplateError

    with pytest.raises(TemplateError, match="bash"):
        Renderer.from_pretrained(smollm2_tokenizer_dir(), tool_format="zsh")


def test_native_template_uses_the_bash_format_when_a_shell_tool_is_offered():
    """A template with its own tool support (Qwen style) still gets the bash format in "bash" mode."""
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.render.renderer import Renderer

    from .conftest import QWEN_STYLE

    r = Renderer.from_pretrained(smollm2_tokenizer_dir(), chat_template=QWEN_STYLE, tool_format="bash")
    tools = harness_tools("mini-swe-agent")
    text = r.render_text([Message("user", "go")], tools)
    assert INSTRUCTION in text and "<tools>" not in text
    native = r.render_text([Message("user", "go")], NO_SHELL)
    assert "<tools>" in native  # no shell tool: the template's own tool rendering


# ---- exact history with bash-format turns ------------------------------------------------------------
REPLIES = [
    "I will look at the files first.\n```bash\nls -la\n```",
    "```bash\ncat notes.txt\n```",
    "Now I write the answer.\n```sh\necho cobalt > answer.txt\n```\nThat should do it.",
    "```bash\necho unterminated > b.txt",  # stops with the block open: still a call
    "The word is in answer.txt.",
]
RESULTS = ["(Bash completed with no output)", "Exit code 1\ncat: notes.txt: No such file",
           "Chunk ID: 1\nProcess exited with code 0\nOutput:\n", '{"returncode": 0, "output": ""}']


@pytest.mark.parametrize("harness", ["claude-code", "codex", "openclaw", "mini-swe-agent"])
@pytest.mark.parametrize("fmt", ["bash_renderer", "examples_renderer"])
def test_exact_history_with_bash_format_turns(fmt, harness, request):
    """Each request resends the served history the way a harness does (arguments re-serialised as
    JSON strings, ids rewritten): call k+1's prompt extends call k's prompt + sampled ids, the
    sampled ids keep their version, and while the replies are in canonical form the ids equal a plain
    full rendering of the history."""
    r = request.getfixturevalue(fmt)
    tools = harness_tools(harness)
    conv = Conversation(r)
    history = [Message("system", "You are an agent."), Message("user", "Put the word cobalt in answer.txt.")]
    prev = None
    for k, text in enumerate(REPLIES):
        rendered = conv.prepare(list(history), tools)
        if prev is not None:
            head = prev[0] + prev[1]
            assert rendered.ids[: len(head)] == head
            assert rendered.provenance[len(prev[0]) : len(head)] == [k - 1] * len(prev[1])
            assert rendered.incremental
        if k <= 2:  # replies so far in canonical form: a plain full rendering gives the same ids
            assert rendered.ids == r.render(history, tools)
        else:  # reply 2 was written "```sh ... ``` + text": the prompt keeps what was sampled, not a re-rendering
            assert rendered.ids != r.render(history, tools)
        sampled = r.encode(text) + [r.eot_id]
        parsed = conv.commit(rendered, sampled, policy_version=k)
        prev = (rendered.ids, sampled)
        if k < len(RESULTS):
            [call] = parsed.tool_calls
            # the harness's own shape: arguments as a JSON string, id rewritten
            resent = ToolCall(call.id.replace("_", ""), call.name, json.dumps(call.arguments, indent=1))
            history += [Message("assistant", parsed.content, tool_calls=[resent]),
                        Message("tool", RESULTS[k], tool_call_id=resent.id)]
        else:
            assert parsed.tool_calls == [] and parsed.finish_reason == "stop"
    assert all(t.mode == "exact" for t in conv.turns)


def test_full_rendering_splices_bash_format_replies(bash_renderer):
    """A request that continues no turn (OpenClaw's per-request context message) still carries our
    bash-format reply as its sampled ids."""
    r = bash_renderer
    tools = harness_tools("openclaw")
    conv = Conversation(r)
    history = [Message("system", "Agent."), Message("user", "go"), Message("user", "<<<CTX 0>>>")]
    rendered = conv.prepare(history, tools)
    sampled = r.encode("Listing.\n```bash\nls\n```") + [r.eot_id]
    parsed = conv.commit(rendered, sampled, policy_version=3)
    history = history[:2] + [Message("assistant", parsed.content, tool_calls=parsed.tool_calls),
                             Message("tool", "a.txt", tool_call_id=parsed.tool_calls[0].id),
                             Message("user", "<<<CTX 1>>>")]
    nxt = conv.prepare(history, tools)
    start = next(i for i in range(len(nxt.ids)) if nxt.ids[i : i + len(sampled)] == sampled)
    assert nxt.provenance[start : start + len(sampled)] == [3] * len(sampled)
    assert PROMPT in nxt.provenance[:start]


@pytest.mark.parametrize("harness", ["claude-code", "codex", "openclaw"])
def test_examples_format_adds_worked_turns_only_with_a_shell_tool(examples_renderer, bash_renderer, harness):
    """bash_examples = bash + the worked examples as earlier turns after the system prompt; without a
    shell tool both fall back to the template's own convention (no examples)."""
    from harnessrl.render import bash_format

    msgs = [Message("system", "You are an agent."), Message("user", "Delete a.txt.")]
    tools = harness_tools(harness)
    with_examples = examples_renderer.render_text(msgs, tools)
    plain = bash_renderer.render_text(msgs, tools)
    for task, command in bash_format.EXAMPLES:
        assert task in with_examples and f"```bash\n{command}\n```" in with_examples and task not in plain
    assert with_examples.index(bash_format.INSTRUCTION) < with_examples.index(bash_format.EXAMPLES[0][0])
    assert with_examples.rstrip().endswith("Delete a.txt.<|im_end|>\n<|im_start|>assistant".rstrip())
    assert examples_renderer.render_text(msgs, []) == bash_renderer.render_text(msgs, [])


def test_examples_sit_right_before_the_task_after_context_turns(examples_renderer):
    """A harness that sends context turns first (Codex: permissions, then the environment) gets the
    worked examples between those and the task, and the place stays put in later calls (each call's
    prompt extends the one before: the prefix property the trees rely on)."""
    from harnessrl.render import bash_format

    tools = harness_tools("codex")
    first = [Message("system", "You are Codex."), Message("user", "<permissions>sandboxed</permissions>"),
             Message("user", "<environment_context>/work</environment_context>"), Message("user", "Delete a.txt.")]
    text = examples_renderer.render_text(first, tools)
    assert (text.index("<environment_context>") < text.index(bash_format.EXAMPLES[0][0])
            < text.index(bash_format.EXAMPLES[-1][0]) < text.index("Delete a.txt."))
    reply = Message("assistant", "", tool_calls=[ToolCall("c1", "exec_command", {"cmd": "rm a.txt"})])
    later = first + [reply, Message("tool", "", tool_call_id="c1"), Message("user", "Anything else?")]
    prompt = examples_renderer.render_text(first, tools, add_generation_prompt=False)
    assert examples_renderer.render_text(later, tools).startswith(prompt)


def test_a_system_message_after_the_task_joins_the_task_turn(examples_renderer):
    """Claude Code 2.1 sends its environment as a system message after the task's user message:
    rendered, it joins that user turn in front of the task (the task is read last), the worked
    examples stay before it, and the next call's prompt still extends this one."""
    from harnessrl.render import bash_format

    tools = harness_tools("claude-code")
    first = [Message("system", "You are Claude Code."), Message("user", "Delete a.txt."),
             Message("system", "# Environment\\nPrimary working directory: /workspace")]
    text = examples_renderer.render_text(first, tools)
    assert text.count("<|im_start|>system") == 1
    assert (text.index(bash_format.EXAMPLES[-1][0]) < text.index("# Environment") < text.index("Delete a.txt.")
            < text.index("<|im_start|>assistant", text.index("Delete a.txt.")))
    reply = Message("assistant", "", tool_calls=[ToolCall("c1", "Bash", {"command": "rm a.txt"})])
    later = first + [reply, Message("tool", "", tool_call_id="c1")]
    prompt = examples_renderer.render_text(first, tools, add_generation_prompt=False)
    assert examples_renderer.render_text(later, tools).startswith(prompt)
