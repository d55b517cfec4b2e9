"""ReplyStream (proxy/stream_text.py): fed the sampled ids one at a time, the text it lets a stream
send early plus its rest at the end is exactly the parsed reply, for every reply shape."""

from __future__ import annotations

import pytest

from harnessrl.proxy.stream_text import ReplyStream
from harnessrl.render.messages import ToolSpec

from .helpers import tool_call_text

SHELL = ToolSpec(name="bash", description="Run a command",
                 parameters={"type": "object", "properties": {"command": {"type": "string"}}})
REPLIES = [
    "Hello there, this is a plain answer.",
    "  \n leading and trailing whitespace \n\n ",
    "multi-byte: ü, 日本語, 🎉🎉 and é at the end é",
    "Let me look.\n" + tool_call_text(("bash", {"command": "ls"})) + "after the call",
    "<tool_call>not json</tool_call> stays text",
    "<think>\nfirst I plan\n</think>\n\nThen I answer 🎉.",
    "<think>never closed, all reasoning",
    "text with <tool_ca but no tag",
    "ends with a partial marker <tool_",
    "",
]


def _stream(renderer, text: str, tools: list[ToolSpec], stop: list[str], eot: bool = True):
    ids = list(renderer.encode(text)) + ([renderer.eot_id] if eot else [])
    stream = ReplyStream(renderer, tools, stop)
    early = [d for token in ids for d in stream.feed([token])]
    parsed = renderer.parse(ids, finish_reason="stop" if eot else "length", tools=tools, stop=stop)
    return early, stream.rest(parsed), parsed


def _joined(deltas, channel: str) -> str:
    return "".join(text for ch, text in deltas if ch == channel)


@pytest.mark.parametrize("text", REPLIES)
@pytest.mark.parametrize("stop", [[], ["the"], ["é"]])
def test_early_text_plus_rest_is_the_parsed_reply(renderer, text, stop):
    early, rest, parsed = _stream(renderer, text, [], stop)
    assert _joined(early + rest, "text") == parsed.content
    assert (_joined(early + rest, "reasoning") or None) == parsed.reasoning
    assert sum(ch == "reasoning" for ch, _ in early + rest) <= 1  # the reasoning is sent whole, once
    channels = [ch for ch, _ in early + rest]
    assert channels == sorted(channels)  # reasoning before any text ("reasoning" < "text")


def test_plain_text_streams_token_by_token(renderer):
    text = "One two three four five six seven eight nine ten."
    early, rest, parsed = _stream(renderer, text, [], [])
    assert len(early) >= 8 and _joined(early, "text") == parsed.content == text and not rest


def test_text_before_a_tool_call_streams_then_holds(renderer):
    text = "I will run it now.\n" + tool_call_text(("bash", {"command": "ls"}))
    early, rest, parsed = _stream(renderer, text, [], [])
    assert _joined(early, "text") == "I will run it now." == parsed.content and not rest
    assert [tc.name for tc in parsed.tool_calls] == ["bash"]


def test_reasoning_is_sent_whole_then_content_streams(renderer):
    early, rest, parsed = _stream(renderer, "<think>plan it</think>Answer in several words here.", [], [])
    assert early[0] == ("reasoning", "plan it") and len(early) > 2 and not rest
    assert _joined(early, "text") == parsed.content == "Answer in several words here."


def test_stop_string_cuts_the_stream(renderer):
    early, rest, parsed = _stream(renderer, "keep this STOP drop that", [], ["STOP"])
    assert _joined(early + rest, "text") == parsed.content == "keep this"
    assert "drop" not in _joined(early, "text")


def test_truncated_reply(renderer):
    early, rest, parsed = _stream(renderer, "cut off in the midd", [], [], eot=False)
    assert _joined(early + rest, "text") == parsed.content


@pytest.fixture(scope="module")
def bash_renderer():
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.render.renderer import Renderer

    return Renderer.from_pretrained(smollm2_tokenizer_dir(), tool_format="bash")


@pytest.mark.parametrize("text", [
    "I will list the files.\n```bash\nls -la\n```",
    "```bash\nwc -l a.txt\n```",
    "Some code:\n```python\nprint(1)\n```\nno shell here",
    "Two blocks\n```bash\nls\n```\nthen\n```bash\npwd\n```\nend",
])
def test_bash_format_holds_at_the_fence(bash_renderer, text):
    early, rest, parsed = _stream(bash_renderer, text, [SHELL], [])
    assert _joined(early + rest, "text") == parsed.content
    assert "```" not in _joined(early, "text")
