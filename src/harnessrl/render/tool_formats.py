"""Tool-call text conventions: how tool definitions, calls and results look inside a prompt.

Three conventions:

- ``hermes`` (Hermes / Qwen): tool definitions as JSON lines inside ``<tools></tools>`` in the
  system prompt; each call as one JSON object ``{"name": ..., "arguments": {...}}`` inside its
  own ``<tool_call></tool_call>`` tag; results as ``<tool_response>`` blocks in a user turn.
- ``smollm2`` (the SmolLM2-1.7B-Instruct convention): the same ``<tools>`` block, but all calls of
  a reply as ONE JSON list inside a single ``<tool_call>[...]</tool_call>`` tag.

- ``bash`` (bash_format.py): the model runs the harness's shell tool by writing one fenced
  ```bash block; the other two stay the fallback for calls of other tools.

Parsing accepts both JSON shapes whatever the configured format, several tags (parallel calls), and
malformed JSON (left in the text, never raised).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Literal, get_args

from harnessrl.render.messages import ToolCall, ToolSpec

# The tool formats, named once (render.tool_format, `--tool-format`, the renderer's check)
ToolFormat = Literal["hermes", "smollm2", "bash", "bash_examples"]
TOOL_FORMATS: tuple[ToolFormat, ...] = get_args(ToolFormat)
SHELL_FORMATS: tuple[ToolFormat, ...] = ("bash", "bash_examples")  # the model writes ```bash blocks (render/bash_format.py)

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_TAG_RE = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)

_PREAMBLE = (
    "# Tools\n\n"
    "You can call functions to help with the request. Their signatures are listed, one JSON "
    "object per line, between <tools> and </tools>:\n<tools>\n{tools}\n</tools>\n\n"
)
_HERMES_HOWTO = (
    "To call a function, write a JSON object with its name and arguments between "
    "<tool_call> and </tool_call>, one tag per call:\n"
    '<tool_call>\n{{"name": <function-name>, "arguments": <arguments-as-json-object>}}\n</tool_call>'
)
_SMOLLM2_HOWTO = (
    "To call functions, write a JSON list of calls, each with its name and arguments, between "
    "<tool_call> and </tool_call>:\n"
    '<tool_call>[{{"name": <function-name>, "arguments": <arguments-as-json-object>}}, ...]</tool_call>'
)


def tool_schema(tool: ToolSpec) -> dict[str, Any]:
    """The OpenAI-style function schema that chat templates expect in ``tools=``."""
    params = tool.parameters or {"type": "object", "properties": {}}
    if tool.kind == "custom":
        params = {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}
    return {"type": "function", "function": {"name": tool.name, "description": tool.description, "parameters": params}}


def system_block(tools: list[ToolSpec], fmt: str) -> str:
    """Tool definitions + calling instructions to append to the system prompt."""
    lines = "\n".join(json.dumps(tool_schema(t), ensure_ascii=False) for t in tools)
    howto = _SMOLLM2_HOWTO if fmt == "smollm2" else _HERMES_HOWTO
    return _PREAMBLE.format(tools=lines) + howto.format()


def _call_object(call: ToolCall) -> dict[str, Any]:
    return {"name": call.name, "arguments": call.arguments}


def render_calls(calls: list[ToolCall], fmt: str) -> str:
    """The text of an assistant's tool calls in the given convention (no leading separator)."""
    if not calls:
        return ""
    if fmt == "smollm2":
        body = json.dumps([_call_object(c) for c in calls], ensure_ascii=False)
        return f"<tool_call>{body}</tool_call>"
    return "\n".join(
        f"<tool_call>\n{json.dumps(_call_object(c), ensure_ascii=False)}\n</tool_call>" for c in calls
    )


def render_result(content: str) -> str:
    """One tool result as a ``<tool_response>`` block."""
    return f"<tool_response>\n{content}\n</tool_response>"


@dataclass
class RawCall:
    """A tool call as written by the model, before ids are assigned."""

    name: str
    arguments: Any


def _coerce_call(obj: Any) -> RawCall | None:
    if not isinstance(obj, dict):
        return None
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        fn = obj.get("function")
        if isinstance(fn, dict):
            return _coerce_call(fn)
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if args is None:
        args = {}
    if not isinstance(args, (dict, str)):  # a list or a number is no argument object: malformed
        return None
    if isinstance(args, str):
        try:
            decoded = json.loads(args)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict):
            args = decoded
    return RawCall(name=name, arguments=args)


def _parse_body(body: str) -> list[RawCall] | None:
    """Calls in one tag body, or None when it is not valid call JSON."""
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    items = obj if isinstance(obj, list) else [obj]
    calls = [_coerce_call(item) for item in items]
    if not calls or any(c is None for c in calls):
        return None
    return calls  # type: ignore[return-value]


def extract_tool_calls(text: str) -> tuple[str, list[RawCall]]:
    """Split ``text`` into (text without the parsed tool-call tags, calls in order).

    A tag whose body is not valid call JSON stays in the text untouched. A last tag left open
    counts when its whole remaining body is valid call JSON (the model stopped before writing
    ``</tool_call>``); a truncated one is text.
    """
    calls: list[RawCall] = []
    kept: list[str] = []
    pos = 0
    for m in _TAG_RE.finditer(text):
        parsed = _parse_body(m.group(1).strip())
        if parsed is None:
            continue
        kept.append(text[pos : m.start()])
        calls.extend(parsed)
        pos = m.end()
    rest = text[pos:]
    opened = rest.rfind(_OPEN)
    if opened >= 0 and _CLOSE not in rest[opened:]:
        parsed = _parse_body(rest[opened + len(_OPEN) :].strip())
        if parsed is not None:
            calls.extend(parsed)
            rest = rest[:opened]
    kept.append(rest)
    return "".join(kept), calls
