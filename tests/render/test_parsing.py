"""Reply parsing: reasoning, tool calls in both conventions, malformed JSON, finish reasons, ids."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from harnessrl.render.messages import ToolSpec
from harnessrl.render.parsing import call_id, parse_text, split_reasoning
from harnessrl.render.tool_formats import extract_tool_calls, render_calls

BASH = ToolSpec("bash", "Run a command", {"type": "object", "properties": {"command": {"type": "string"}}})
PATCH = ToolSpec("apply_patch", "Apply a patch", kind="custom")


def test_plain_text_is_content():
    p = parse_text("  Hello there.\n", stopped=True)
    assert (p.content, p.reasoning, p.tool_calls, p.finish_reason) == ("Hello there.", None, [], "stop")


def test_hermes_call_with_text_before():
    p = parse_text('Let me look.\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>',
                   stopped=True)
    assert p.content == "Let me look."
    assert [(c.name, c.arguments) for c in p.tool_calls] == [("bash", {"command": "ls"})]
    assert p.finish_reason == "tool_calls"


def test_parallel_calls_in_several_tags():
    text = ('<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>\n'
            '<tool_call>{"name": "bash", "arguments": {"command": "pwd"}}</tool_call>')
    p = parse_text(text, stopped=True, id_seed="s")
    assert [c.arguments["command"] for c in p.tool_calls] == ["ls", "pwd"]
    assert len({c.id for c in p.tool_calls}) == 2
    assert p.content == ""


def test_smollm2_list_convention():
    text = '<tool_call>[{"name": "bash", "arguments": {"command": "ls"}}, {"name": "bash", "arguments": {"command": "id"}}]</tool_call>'
    p = parse_text(text, stopped=True)
    assert [c.arguments["command"] for c in p.tool_calls] == ["ls", "id"]


def test_render_then_extract_roundtrip_both_formats():
    from harnessrl.render.messages import ToolCall

    calls = [ToolCall("a", "bash", {"command": "ls"}), ToolCall("b", "bash", {"command": "cat x"})]
    for fmt in ("hermes", "smollm2"):
        rest, raw = extract_tool_calls(render_calls(calls, fmt))
        assert rest.strip() == ""
        assert [(r.name, r.arguments) for r in raw] == [(c.name, c.arguments) for c in calls]


def test_malformed_json_stays_text_and_never_raises():
    bad = '<tool_call>{"name": "bash", "arguments": {"command": "ls"</tool_call>'
    p = parse_text("ok " + bad, stopped=True)
    assert p.tool_calls == [] and bad in p.content and p.finish_reason == "stop"
    assert parse_text('<tool_call>{"name": "bash", "arguments": [1]}</tool_call>', stopped=True).tool_calls == []
    assert parse_text('<tool_call>{"name": "bash", "arguments": null}</tool_call>', stopped=True).tool_calls[0].arguments == {}
    for junk in ["<tool_call>", "<tool_call></tool_call>", '<tool_call>{"arguments": {}}</tool_call>',
                 "<tool_call>[1, 2]</tool_call>", "</think>", "<think>", "\x00\ufffd"]:
        parse_text(junk, stopped=True)  # no exception


def test_one_good_one_bad_call_keeps_the_good_one():
    text = ('<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>'
            '<tool_call>{"name": bash}</tool_call>')
    p = parse_text(text, stopped=True)
    assert len(p.tool_calls) == 1 and p.content == '<tool_call>{"name": bash}</tool_call>'


def test_string_encoded_arguments_and_parameters_key():
    p = parse_text('<tool_call>{"name": "bash", "parameters": "{\\"command\\": \\"ls\\"}"}</tool_call>', stopped=True)
    assert p.tool_calls[0].arguments == {"command": "ls"}


def test_custom_tool_arguments_are_raw_text():
    p = parse_text('<tool_call>{"name": "apply_patch", "arguments": {"input": "*** Begin Patch"}}</tool_call>',
                   stopped=True, tools=[BASH, PATCH])
    call = p.tool_calls[0]
    assert call.kind == "custom" and call.arguments == "*** Begin Patch"


def test_truncated_reply_is_length_and_unclosed_tag_is_text():
    p = parse_text('<tool_call>\n{"name": "bash", "argu', stopped=False)
    assert p.finish_reason == "length" and p.tool_calls == [] and p.content.startswith("<tool_call>")


def test_last_tag_left_open_with_complete_json_is_a_call():
    p = parse_text('ok\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n', stopped=True)
    assert p.content == "ok" and p.tool_calls[0].arguments == {"command": "ls"} and p.finish_reason == "tool_calls"
    two = parse_text('<tool_call>{"name": "a", "arguments": {}}</tool_call><tool_call>{"name": "b", "arguments": {}}',
                     stopped=True)
    assert [c.name for c in two.tool_calls] == ["a", "b"]


def test_reasoning_split():
    assert split_reasoning("<think>\nplan\n</think>\n\nanswer") == ("plan", "\n\nanswer")
    assert split_reasoning("no thinking") == (None, "no thinking")
    assert split_reasoning("<think>cut off", opened=False) == ("cut off", "")
    assert split_reasoning("plan</think>answer", opened=True) == ("plan", "answer")
    p = parse_text('<think>use ls</think><tool_call>{"name": "bash", "arguments": {}}</tool_call>', stopped=True)
    assert p.reasoning == "use ls" and p.tool_calls[0].name == "bash"


def test_call_ids_are_stable_and_alphanumeric():
    assert call_id("seed", 0) == call_id("seed", 0) != call_id("seed", 1)
    assert call_id("seed", 0).replace("_", "").isalnum()


def test_renderer_parse_strips_stop_token_and_infers_finish(smol):
    ids = smol.encode("Done.") + [smol.eot_id]
    assert smol.parse(ids).finish_reason == "stop"
    assert smol.parse(ids).content == "Done."
    assert smol.parse(ids[:-1]).finish_reason == "length"
    assert smol.parse(ids, finish_reason="length").finish_reason == "length"
    assert smol.parse([]).finish_reason == "length"


fragments = st.sampled_from(["<tool_call>", "</tool_call>", "<think>", "</think>", '{"name": "bash"', ', "arguments": ',
                             "{}", "[", "]", "}", '"x"', "\n", "text ", "null", ","])


@settings(max_examples=300, deadline=None)
@given(st.lists(fragments | st.text(max_size=5), max_size=25), st.booleans(), st.booleans())
def test_parse_never_raises_and_keeps_text(parts, stopped, opened):
    text = "".join(parts)
    p = parse_text(text, stopped=stopped, think_opened=opened)
    assert p.finish_reason in ("stop", "length", "tool_calls")
    assert (p.finish_reason == "length") == (not stopped)
    if not p.tool_calls and p.reasoning is None:
        assert p.content == text.strip()
