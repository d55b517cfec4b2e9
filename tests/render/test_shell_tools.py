"""Shell tools the bash formats drive beyond the argv/string ones: lists of whole command strings
(Cline's `run_commands{commands: [...]}`, recognised from the schema), overrides that name a tool the
detector misses (`shell_tool=NAME:ARG:KIND`), and the suggestions `harness check` prints.

The schemas are the real ones (tests/fixtures/harness_tool_schemas.json: "cline" is Cline 3.0.65's
first request, descriptions dropped)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnessrl.render.bash_format import (
    ShellOverride,
    ShellOverrideError,
    find_shell_tool,
    list_command_text,
    override_suggestions,
    parse_shell_override,
)
from harnessrl.render.messages import Message, ToolCall, ToolSpec

SCHEMAS = json.loads((Path(__file__).resolve().parents[1] / "fixtures" / "harness_tool_schemas.json").read_text())
# a CLI whose shell tool hides behind names the detector does not know
OPAQUE = [ToolSpec("do_it", "", {"type": "object", "properties": {"steps": {"type": "array", "items": {"type": "string"}},
                                                                  "why": {"type": "string"}},
                                 "required": ["steps"]}),
          ToolSpec("note", "", {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})]


def harness_tools(name: str) -> list[ToolSpec]:
    return [ToolSpec(t["name"], "", t["parameters"]) for t in SCHEMAS[name]]


@pytest.fixture(scope="module")
def renderers():
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.render.renderer import Renderer

    tok = smollm2_tokenizer_dir()
    return {"plain": Renderer.from_pretrained(tok, tool_format="bash"),
            "override": Renderer.from_pretrained(tok, tool_format="bash",
                                                 shell_overrides=[ShellOverride("do_it", "steps", "list")])}


def test_cline_run_commands_is_a_list_of_command_strings():
    tools = harness_tools("cline")
    assert len(tools) == 25
    shell = find_shell_tool(tools)
    assert (shell.name, shell.prop, shell.kind, shell.argv) == ("run_commands", "commands", "list", False)
    assert shell.arguments("ls -la | wc -l") == {"commands": ["ls -la | wc -l"]}
    assert shell.command_of(ToolCall("c", "run_commands", {"commands": ["cd a", "make"]})) == "cd a\nmake"
    assert shell.command_of(ToolCall("c", "run_commands", '{"commands": ["pwd"]}')) == "pwd"  # JSON text
    assert shell.command_of(ToolCall("c", "editor", {"commands": ["pwd"]})) is None  # another tool


def test_plural_names_are_lists_singular_arrays_stay_argv():
    def tool(prop):
        return [ToolSpec("t", "", {"type": "object", "properties": {prop: {"type": "array", "items": {"type": "string"}}},
                                   "required": [prop]})]

    assert find_shell_tool(tool("commands")).kind == "list"
    assert find_shell_tool(tool("cmds")).kind == "list"
    assert find_shell_tool(tool("command")).kind == "argv"  # Codex's older shell{command: [argv]}
    assert list_command_text([]) is None and list_command_text([1]) is None and list_command_text("ls") == "ls"


@pytest.mark.parametrize("value, expected", [
    ("run_commands:commands:list", ShellOverride("run_commands", "commands", "list")),
    (" exec : cmd : string ", ShellOverride("exec", "cmd", "string")),
    ({"name": "shell", "arg": "argv", "kind": "argv"}, ShellOverride("shell", "argv", "argv")),
])
def test_override_forms(value, expected):
    got = parse_shell_override(value)
    assert got == expected and parse_shell_override(got.spec()) == got


@pytest.mark.parametrize("value", ["run_commands:commands", "a:b:bash", "a::list", 7, {"name": "a", "arg": "b"},
                                   {"name": "a", "arg": "b", "kind": "list", "extra": 1}])
def test_bad_overrides_show_the_form(value):
    with pytest.raises(ShellOverrideError, match="NAME:ARG:KIND"):
        parse_shell_override(value)


def test_an_override_names_a_tool_the_detector_misses_and_wins_when_offered():
    assert find_shell_tool(OPAQUE) is None
    override = ShellOverride("do_it", "steps", "list")
    shell = find_shell_tool(OPAQUE, (override,))
    assert (shell.name, shell.prop, shell.kind) == ("do_it", "steps", "list")
    assert shell.arguments("ls") == {"steps": ["ls"]}
    # it wins over a detected tool, and is ignored by a request that does not offer it
    cline = harness_tools("cline")
    assert find_shell_tool(cline + OPAQUE, (override,)).name == "do_it"
    assert find_shell_tool(cline, (override,)).name == "run_commands"


def test_suggestions_list_the_overrides_that_could_name_the_tool():
    assert [o.spec() for o in override_suggestions(OPAQUE)] == ["do_it:steps:argv", "do_it:why:string", "note:text:string"]
    named = [ToolSpec("notes", "", {"type": "object", "properties": {"text": {"type": "string"}}}),
             ToolSpec("run_it", "", {"type": "object", "properties": {"line": {"type": "string"}}})]
    assert override_suggestions(named, limit=1)[0].spec() == "run_it:line:string"  # a command-like name first
    assert override_suggestions([]) == [] and override_suggestions(None) == []


def _assistant_text(r, msg: Message, tools: list[ToolSpec]) -> str:
    text = r.render_text([Message("user", "x"), msg], tools, add_generation_prompt=False)
    start = text.rindex("<|im_start|>assistant\n") + len("<|im_start|>assistant\n")
    return text[start: text.index(r.eot_text, start)]


@pytest.mark.parametrize("which, tools, name, prop", [
    ("plain", "cline", "run_commands", "commands"),
    ("override", "opaque", "do_it", "steps"),
])
def test_a_block_becomes_one_list_call_and_renders_back(renderers, which, tools, name, prop):
    r = renderers[which]
    specs = harness_tools("cline") if tools == "cline" else OPAQUE
    text = "I will look.\n```bash\nls -la\ncat a.txt\n```"
    parsed = r.parse(r.encode(text) + [r.eot_id], tools=specs)
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [(name, {prop: ["ls -la\ncat a.txt"]})]
    assert _assistant_text(r, Message("assistant", parsed.content, tool_calls=parsed.tool_calls), specs) == text


def test_without_the_override_the_opaque_cli_gets_the_json_tool_list(renderers):
    msgs = [Message("user", "go")]
    assert "<tools>" in renderers["plain"].render_text(msgs, OPAQUE)
    assert "<tools>" not in renderers["override"].render_text(msgs, OPAQUE)
    assert "```bash" in renderers["override"].render_text(msgs, OPAQUE)
