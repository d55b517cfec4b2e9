"""Incremental rendering: the text a template writes AFTER one assistant reply, without the history.

The tail (messages after our reply + the generation prompt) is rendered behind a tiny stub
prefix — [system "·"] (when the real history starts with a system message), user "·", a stand-in
of the reply — and cut right after the reply's end-of-turn token. Cost: O(tail), not O(history).

`full_tail_text` gets the same text from a full rendering (O(history) jinja); it is the fallback
and the reference: `incremental_is_exact` compares both on probe conversations when a Renderer is
built, and a renderer with ``verify_incremental=True`` compares them on every call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harnessrl.render.errors import TemplateError
from harnessrl.render.messages import Message, ToolCall, ToolSpec

if TYPE_CHECKING:
    from harnessrl.render.renderer import Renderer

_STUB = "\u00b7"
_STUB_TOOL = ToolSpec(name="stub", description="", parameters={"type": "object", "properties": {}})


def stand_in(reply: Message) -> Message:
    """The reply reduced to its shape: no text that could contain an end-of-turn string."""
    calls = [ToolCall(id=c.id, name=c.name, arguments={}, kind="function") for c in reply.tool_calls]
    return Message("assistant", _STUB, tool_calls=calls)


def _cut(r: "Renderer", head: list[Message], reply: Message, tail: list[Message],
         tools: list[ToolSpec]) -> str | None:
    """Text after ``reply``'s end-of-turn token in render(head + [reply] + tail)."""
    before = r.render_text(head, tools, add_generation_prompt=False)
    whole = r.render_text(head + [stand_in(reply)] + tail, tools, add_generation_prompt=True)
    if not whole.startswith(before):
        return None
    at = whole.find(r.eot_text, len(before))
    if at < 0:
        return None
    return whole[at + len(r.eot_text) :]


def _stub_tools(r: "Renderer", tools: list[ToolSpec]) -> list[ToolSpec]:
    """Tools for the stub rendering: none, or one that renders the tail as ``tools`` do. The "bash"
    format renders calls and results by the shell tool it finds, so that tool stands in itself."""
    if not tools:
        return []
    shell = r.info.shell_tool(tools)
    return [shell.spec] if shell is not None and shell.spec is not None else [_STUB_TOOL]


def stub_tail_text(r: "Renderer", *, system_first: bool, reply: Message, tail: list[Message],
                   has_tools: bool, tools: list[ToolSpec] | None = None) -> str | None:
    """Tail text rendered behind a stub prefix (None when the template does not allow the cut).
    ``tools``: the request's tools (when given they decide the stub tool; else ``has_tools``)."""
    head = ([Message("system", _STUB)] if system_first else []) + [Message("user", _STUB)]
    stub = _stub_tools(r, tools) if tools is not None else ([_STUB_TOOL] if has_tools else [])
    return _cut(r, head, reply, tail, stub)


def full_tail_text(r: "Renderer", *, history: list[Message], reply: Message, tail: list[Message],
                   tools: list[ToolSpec]) -> str | None:
    """Tail text cut from a full rendering of history + reply + tail."""
    return _cut(r, history, reply, tail, tools)


def tail_text(r: "Renderer", *, history: list[Message], reply: Message, tail: list[Message],
              tools: list[ToolSpec]) -> tuple[str | None, bool]:
    """(tail text, rendered incrementally?) — incremental when the renderer's probes allowed it."""
    system_first = bool(history) and history[0].role == "system"
    if r.incremental_ok:
        try:
            fast = stub_tail_text(r, system_first=system_first, reply=reply, tail=tail, has_tools=bool(tools),
                                  tools=tools)
        except TemplateError:  # the template refuses the stub shape: the full rendering decides
            fast = None
        if fast is not None and not r.verify_incremental:
            return fast, True
        if fast is not None:
            slow = full_tail_text(r, history=history, reply=reply, tail=tail, tools=tools)
            return (fast, True) if fast == slow else (slow, False)
    return full_tail_text(r, history=history, reply=reply, tail=tail, tools=tools), False


def _probe_cases() -> list[tuple[list[Message], Message, list[Message], list[ToolSpec]]]:
    tools = [ToolSpec("read", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}),
             ToolSpec("run", "Run a command.", {"type": "object", "properties": {"cmd": {"type": "string"}}})]
    call = [ToolCall("c1", "read", {"path": "a"}), ToolCall("c2", "run", {"cmd": "ls"})]
    tail_call = Message("assistant", "again", tool_calls=[ToolCall("c3", "run", {"cmd": "ls -a"})])
    sys_user = [Message("system", "You are a careful agent."), Message("user", "Fix the bug in a.py")]
    plain = Message("assistant", "Looking.")
    calling = Message("assistant", "", tool_calls=call)
    results = [Message("tool", "x = 1", tool_call_id="c1"), Message("tool", "a.py", tool_call_id="c2")]
    cases = []
    for history in (sys_user, sys_user[1:], sys_user + [plain, Message("user", "go on")]):
        for toolset in ([], tools):
            cases.append((history, plain, [Message("user", "and then?")], toolset))
            cases.append((history, plain, [], toolset))
            cases.append((history, calling, results, toolset))
            cases.append((history, calling, results + [Message("user", "thanks")], toolset))
            cases.append((history, calling, results + [tail_call, results[1]], toolset))
    return cases


def incremental_is_exact(r: "Renderer") -> bool:
    """Does stub rendering give the full rendering's tail on every probe conversation?"""
    try:
        for history, reply, tail, tools in _probe_cases():
            system_first = history[0].role == "system"
            fast = stub_tail_text(r, system_first=system_first, reply=reply, tail=tail, has_tools=bool(tools),
                                  tools=tools)
            slow = full_tail_text(r, history=history, reply=reply, tail=tail, tools=tools)
            if fast is None or fast != slow:
                return False
    except Exception:  # noqa: BLE001 - a template that rejects a probe shape: use full rendering
        return False
    return True
