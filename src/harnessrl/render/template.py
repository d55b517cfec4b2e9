"""What a chat template can do, and Message -> the dicts that template expects.

Templates with their own tool support (Qwen/Hermes style: they read ``tools`` and
``tool_calls``) get OpenAI-shaped tools, calls and ``role: tool`` messages and render them
themselves. Plain templates (e.g. SmolLM2-135M's ChatML) get the tool convention injected
here: definitions appended to the system message, calls written into the assistant text,
results as ``<tool_response>`` blocks in one user turn per run of tool messages.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from harnessrl.render.errors import TemplateError
from harnessrl.render.messages import Message, ToolCall, ToolSpec
from harnessrl.render import bash_format
from harnessrl.render.tool_formats import SHELL_FORMATS, TOOL_FORMATS, render_calls, render_result, system_block, tool_schema

__all__ = ["TemplateError", "TemplateInfo", "detect", "to_template"]


@dataclass(frozen=True)
class TemplateInfo:
    native_tools: bool  # the template renders tools / tool_calls / tool messages itself
    tool_format: str  # "hermes" | "smollm2" | "bash": convention injected into plain templates
    reasoning_key: str | None  # message field the template reads thinking from ("reasoning_content")
    thinks: bool  # the template knows <think> blocks
    fallback_format: str = "hermes"  # the template's own convention: used by "bash" when no shell tool is offered
    # shell tools named by hand (a `command:` harness's shell_tool option): they win when offered
    shell_overrides: tuple[bash_format.ShellOverride, ...] = ()

    def shell_tool(self, tools: list[ToolSpec] | None) -> bash_format.ShellTool | None:
        """The shell tool the "bash" format drives for these tools (None: another format, or none found)."""
        if self.tool_format not in SHELL_FORMATS:
            return None
        return bash_format.find_shell_tool(tools, self.shell_overrides)


def detect(source: str, tool_format: str | None = None,
           shell_overrides: tuple[bash_format.ShellOverride, ...] = ()) -> TemplateInfo:
    """Capabilities of a template from its jinja source; ``tool_format`` overrides the convention,
    ``shell_overrides`` name shell tools the schemas do not give away (render/bash_format.py)."""
    if tool_format is not None and tool_format not in TOOL_FORMATS:
        raise TemplateError(f"unknown tool format {tool_format!r}; choose one of {', '.join(TOOL_FORMATS)}")
    native = "tools" in source and "tool_call" in source
    default = "smollm2" if "<tool_call>[" in source else "hermes"
    fmt = tool_format or default
    reasoning_key = "reasoning_content" if "reasoning_content" in source else None
    thinks = "<think>" in source or reasoning_key is not None
    return TemplateInfo(native_tools=native, tool_format=fmt, reasoning_key=reasoning_key, thinks=thinks,
                        fallback_format=default, shell_overrides=tuple(shell_overrides))


def _custom_args(call: ToolCall) -> Any:
    if call.kind == "custom" and isinstance(call.arguments, str):
        return {"input": call.arguments}
    return call.arguments


def _with_reasoning(content: str, reasoning: str | None, info: TemplateInfo) -> tuple[str, dict[str, Any]]:
    """(content, extra fields) carrying the reasoning the way the template reads it."""
    if not reasoning or not info.thinks:
        return content, {}
    if info.reasoning_key:
        return content, {info.reasoning_key: reasoning}
    return f"<think>\n{reasoning}\n</think>\n\n{content}", {}


def _native_message(msg: Message, info: TemplateInfo) -> dict[str, Any]:
    content = msg.content or ""
    if msg.role == "assistant":
        content, extra = _with_reasoning(content, msg.reasoning, info)
        out: dict[str, Any] = {"role": "assistant", "content": content, **extra}
        if msg.tool_calls:
            out["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": _custom_args(c)}}
                for c in msg.tool_calls
            ]
        return out
    if msg.role == "tool":
        out = {"role": "tool", "content": content, "tool_call_id": msg.tool_call_id or ""}
        if msg.name:
            out["name"] = msg.name
        return out
    return {"role": msg.role, "content": content}


def _injected_messages(messages: list[Message], tools: list[ToolSpec], info: TemplateInfo,
                       shell: bash_format.ShellTool | None = None) -> list[dict[str, Any]]:
    """Messages with the tool convention written into the text (``shell``: the "bash" format)."""
    fmt = info.fallback_format if info.tool_format in SHELL_FORMATS else info.tool_format
    out: list[dict[str, Any]] = []
    for msg in messages:
        content = msg.content or ""
        if msg.role == "tool":
            block = bash_format.render_result(content) if shell else render_result(content)
            if out and out[-1].get("_tool_run"):
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block, "_tool_run": True})
            continue
        if msg.role == "assistant":
            texts = []
            for c in msg.tool_calls:
                command = shell.command_of(c) if shell else None
                if command is not None:
                    texts.append(bash_format.render_command(command))
                else:
                    texts.append(render_calls([ToolCall(c.id, c.name, _custom_args(c), c.kind)], fmt))
            if fmt == "smollm2" and not shell and len(texts) > 1:  # all calls in one tag
                texts = [render_calls([ToolCall(c.id, c.name, _custom_args(c), c.kind) for c in msg.tool_calls], fmt)]
            content = bash_format.render_reply(content, texts)
            content, _ = _with_reasoning(content, msg.reasoning, info)
        out.append({"role": msg.role, "content": content})
    if tools:
        block = bash_format.INSTRUCTION if shell else system_block(tools, fmt)
        if out and out[0]["role"] == "system":
            out[0]["content"] = f"{out[0]['content']}\n\n{block}" if out[0]["content"] else block
        else:
            out.insert(0, {"role": "system", "content": block})
        if shell and info.tool_format == "bash_examples":  # worked examples as earlier turns
            at = _examples_at(out)
            out[at:at] = bash_format.example_turns()
    for item in out:
        item.pop("_tool_run", None)
    return out


def fold_late_system(messages: list[Message]) -> list[Message]:
    """A system message right after a user message joins that user turn, in front of its text.

    Claude Code 2.1 sends its environment block as a system message AFTER the task's user message, so
    a template would show the model the task and then a system turn: a small model then answers the
    environment ("What's your task?") instead of the task. Folded, the task is the last thing it
    reads. Many templates (Qwen's among them) also reject a system message past the first. Histories
    only grow at the end, and the user message a system message follows has no reply yet, so the
    fold never changes text an earlier call rendered: each call's prompt still extends the last."""
    out: list[Message] = []
    for m in messages:
        if m.role == "system" and out and out[-1].role == "user":
            prev = out[-1]
            out[-1] = replace(prev, content=f"{m.content}\n\n{prev.content}" if prev.content else m.content)
        else:
            out.append(m)
    return out


def _examples_at(out: list[dict[str, Any]]) -> int:
    """Where the worked examples go: right before the task, i.e. the last user message before the
    first assistant reply (after any context messages a harness sends first, such as Codex's
    permissions and environment turns); after the system prompt when there is none. The place is the
    same in every call of a conversation, so each call's prompt still extends the one before."""
    first_reply = next((i for i, m in enumerate(out) if m["role"] == "assistant"), len(out))
    users = [i for i in range(1, first_reply) if out[i]["role"] == "user"]
    return users[-1] if users else 1


def to_template(
    messages: list[Message], tools: list[ToolSpec], info: TemplateInfo
) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """(template messages, template tools or None) for ``apply_chat_template``."""
    messages = fold_late_system(messages)
    shell = info.shell_tool(tools)
    if shell is not None:  # the "bash" format, whatever the template's own tool support
        return _injected_messages(messages, tools, info, shell), None
    if info.native_tools:
        return [_native_message(m, info) for m in messages], ([tool_schema(t) for t in tools] or None)
    return _injected_messages(messages, tools, info), None
