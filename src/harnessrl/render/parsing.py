"""Sampled text -> ParsedCompletion: reasoning split, tool-call extraction, stable call ids.

Never raises on model output: malformed tool JSON stays in the content as text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Literal

from harnessrl.render.messages import ParsedCompletion, ToolCall, ToolSpec
from harnessrl.render.bash_format import ShellTool, extract_commands
from harnessrl.render.tool_formats import RawCall, extract_tool_calls

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


def split_reasoning(text: str, opened: bool = False) -> tuple[str | None, str]:
    """(reasoning, rest) of a reply. ``opened``: the generation prompt already opened ``<think>``.

    A reply that opens ``<think>`` and never closes it (truncated) is all reasoning.
    """
    stripped = text.lstrip()
    if stripped.startswith(THINK_OPEN):
        body = stripped[len(THINK_OPEN) :]
    elif opened:
        body = text
    else:
        return None, text
    if THINK_CLOSE not in body:
        return body.strip("\n"), ""
    reasoning, rest = body.split(THINK_CLOSE, 1)
    return reasoning.strip("\n"), rest


def call_id(seed: str, index: int) -> str:
    """A stable tool-call id: same seed and index, same id. Alphanumeric plus one underscore."""
    digest = hashlib.sha1(f"{seed}|{index}".encode()).hexdigest()[:24]
    return f"call_{digest}"


def _finish_call(raw: RawCall, seed: str, index: int, kinds: Mapping[str, str]) -> ToolCall:
    args: Any = raw.arguments
    kind = kinds.get(raw.name, "function")
    if kind == "custom":
        if isinstance(args, dict) and set(args) == {"input"} and isinstance(args["input"], str):
            args = args["input"]
        elif not isinstance(args, str):
            args = json.dumps(args, ensure_ascii=False)
    return ToolCall(id=call_id(seed, index), name=raw.name, arguments=args, kind=kind)  # type: ignore[arg-type]


def parse_text(
    text: str,
    *,
    stopped: bool,
    tools: list[ToolSpec] | None = None,
    id_seed: str = "",
    think_opened: bool = False,
    shell: ShellTool | None = None,
) -> ParsedCompletion:
    """Parse decoded reply text (without the stop token).

    ``stopped``: the reply ended with a stop token (else it hit the length limit).
    ``shell``: the "bash" format's shell tool: the reply's ```bash blocks become one call of it
    (after any ``<tool_call>`` tags); a last block left open counts only when ``stopped``.
    Finish reason: "length" when not stopped, else "tool_calls" when calls were parsed, else "stop".
    """
    reasoning, rest = split_reasoning(text, opened=think_opened)
    content, raw_calls = extract_tool_calls(rest)
    if shell is not None:
        content, command = extract_commands(content, allow_open=stopped)
        if command is not None:
            raw_calls.append(RawCall(shell.name, shell.arguments(command)))
    kinds = {t.name: t.kind for t in (tools or [])}
    calls = [_finish_call(rc, id_seed, i, kinds) for i, rc in enumerate(raw_calls)]
    finish: Literal["stop", "length", "tool_calls"]
    if not stopped:
        finish = "length"
    elif calls:
        finish = "tool_calls"
    else:
        finish = "stop"
    return ParsedCompletion(content=content.strip(), reasoning=reasoning, tool_calls=calls, finish_reason=finish)
