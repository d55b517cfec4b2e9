"""The ``bash`` tool format: the model runs a command by writing one fenced ```bash block.

Small models (SmolLM2-135M) rarely write valid tool-call JSON but often write a fenced shell block
(docs/machine.md). In this format:

- The harness's *shell tool* is found from the request's tool schemas (`find_shell_tool`): a
  function tool with a required string property such as ``command`` / ``cmd`` (or an argv array,
  Codex's older ``shell{command: [...]}``, or a list of whole command strings, Cline's
  ``run_commands{commands: [...]}``). Tool names only break ties. The harness's name is never used.
  A tool the schemas do not give away is named by a `ShellOverride` (a `command:` harness's
  ``shell_tool=NAME:ARG:KIND`` option), which wins over the detector when the request offers it.
- The system prompt gets a short instruction (`INSTRUCTION`) instead of the JSON tool list. The
  harness's other tools are not shown to the model.
- A reply's ```bash / ```sh / ```shell blocks become ONE call of the shell tool. Several blocks
  are run as one script, in order, joined by newlines. A last block left open counts when the
  reply stopped on its own (not when it was cut by the length limit). The text outside the
  blocks is the reply's content.
- Arguments fit the tool's schema: ``{prop: cmd}`` for a string property, ``{prop: ["bash",
  "-lc", cmd]}`` for an argv array, ``{prop: [cmd]}`` for a list of command strings, plus the
  ``default`` of any other required property.
- In history a shell call renders back as the same block (content, newline, block); any other
  call renders in the template's fallback convention (Hermes ``<tool_call>`` JSON), which the
  parser also reads. Every tool result renders as a fenced output block in a user turn
  (`render_result`), whatever its tool: the rendering of the tail never depends on the tool list.
- A request whose tools hold no shell tool uses the template's default format for everything
  (the JSON tool list, ``<tool_call>`` parsing); a request without tools is plain chat.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Literal

from harnessrl.render.errors import RenderError
from harnessrl.render.messages import ToolCall, ToolSpec

INSTRUCTION = (
    "You can run bash commands in the current directory. To run a command, reply with one "
    "```bash code block:\n```bash\nls -la\n```\n"
    "The command's output comes back in the next message. Run one command per reply. "
    "When the task is done, reply without a code block."
)
# A variant with worked examples, measured against INSTRUCTION by benchmarks/bash_format_instruction.py
# (SmolLM2-135M, 144 samples each: format 40% vs 35%, one-shot pass 2.1% for both), so not the default.
# No built-in task uses these names.
EXAMPLES_INSTRUCTION = (
    "You can run bash commands in the current directory. To run a command, reply with one "
    "```bash code block. The command's output comes back in the next message. Run one command per "
    "reply. When the task is done, reply without a code block.\n\n"
    "Examples of tasks and the command to run:\n"
    "Task: Copy notes.md to backup.md.\n```bash\ncp notes.md backup.md\n```\n"
    "Task: Delete the file old.md.\n```bash\nrm old.md\n```\n"
    "Task: In plan.md, change the word red to blue.\n```bash\nsed -i 's/red/blue/g' plan.md\n```\n"
    "Task: Write the word hello into a file named greeting.md.\n```bash\necho hello > greeting.md\n```"
)

# The "bash_examples" format: these worked examples as earlier chat turns after the system prompt
# (task, the ```bash block, its output, "Done."). SmolLM2-135M follows turns far more than a
# description: benchmarks/bash_format_instruction.py measured, on 144 first replies to held-out tasks,
# format 92% vs 35% and one-shot pass 9.0% vs 2.1% (worked examples inside the system prompt: 2.1%).
EXAMPLES = (
    ("Copy notes.md to backup.md.", "cp notes.md backup.md"),
    ("Delete the file old.md.", "rm old.md"),
    ("Write the word hello into a file named greeting.md.", "echo hello > greeting.md"),
)


def example_turns() -> list[dict[str, str]]:
    """The worked examples as template messages (a fresh list each call)."""
    turns: list[dict[str, str]] = []
    for task, command in EXAMPLES:
        turns += [{"role": "user", "content": task}, {"role": "assistant", "content": render_command(command)},
                  {"role": "user", "content": render_result("")}, {"role": "assistant", "content": "Done."}]
    return turns


_NAMES = ("command", "cmd", "script", "commands", "cmds")  # property names that hold the command, best first
_TOOL_HINTS = ("bash", "shell", "exec_command", "exec", "run_shell", "terminal", "run", "execute")
_LANGS = ("bash", "sh", "shell")
_ARGV_SHELLS = ("bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/usr/bin/bash", "/bin/zsh")
# ```bash at a line start, optional spaces, a newline, the body, then a closing ``` on its own line
_BLOCK_RE = re.compile(r"(?m)^[ \t]*```[ \t]*(bash|sh|shell)[ \t]*\n(.*?)^[ \t]*```[ \t]*$", re.DOTALL | re.IGNORECASE)
_OPEN_RE = re.compile(r"(?m)^[ \t]*```[ \t]*(bash|sh|shell)[ \t]*\n", re.IGNORECASE)

# How a command goes into the shell tool's argument: "string" (the command line), "argv" (an array,
# ["bash", "-lc", cmd]) or "list" (an array of whole command strings, [cmd]).
ShellKind = Literal["string", "argv", "list"]
SHELL_KINDS: tuple[str, ...] = ("string", "argv", "list")
_LIST_PROPS = ("commands", "cmds")  # an array of strings under these names holds command lines, not argv


class ShellOverrideError(RenderError):
    """A shell tool override that is not NAME:ARG:KIND (the message shows the form)."""


@dataclass(frozen=True)
class ShellOverride:
    """The shell tool named by hand, for a harness whose schemas the detector does not read:
    the tool's name, the argument that holds the command, and how (`ShellKind`)."""

    name: str
    prop: str
    kind: ShellKind

    def spec(self) -> str:
        """The `shell_tool=` value that gives this override."""
        return f"{self.name}:{self.prop}:{self.kind}"


def parse_shell_override(value: Any) -> ShellOverride:
    """`NAME:ARG:KIND` (a `command:` spec option) or `{name, arg, kind}` (a run config's options)."""
    form = "NAME:ARG:KIND with KIND string | argv | list, e.g. run_commands:commands:list"
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"name", "arg", "kind"})
        if unknown:
            raise ShellOverrideError(f"shell_tool has unknown keys {unknown}; give {{name, arg, kind}} or {form}")
        parts = [str(value.get(k) or "") for k in ("name", "arg", "kind")]
    elif isinstance(value, str):
        parts = value.split(":")
    else:
        raise ShellOverrideError(f"shell_tool must be {form}, got {value!r}")
    if len(parts) != 3 or not all(p.strip() for p in parts) or parts[2].strip() not in SHELL_KINDS:
        raise ShellOverrideError(f"shell_tool must be {form}, got {value!r}")
    name, prop, kind = (p.strip() for p in parts)
    return ShellOverride(name, prop, kind)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ShellTool:
    """The harness's shell tool and how a command goes into its arguments."""

    name: str
    prop: str  # the property that holds the command
    kind: ShellKind = "string"
    defaults: tuple[tuple[str, Any], ...] = ()  # other required properties with a schema default
    spec: ToolSpec | None = field(default=None, compare=False, repr=False)  # the tool as the request gave it

    @property
    def argv(self) -> bool:
        return self.kind == "argv"

    def arguments(self, command: str) -> dict[str, Any]:
        value: Any = {"argv": ["bash", "-lc", command], "list": [command]}.get(self.kind, command)
        return {**dict(self.defaults), self.prop: value}

    def command_of(self, call: ToolCall) -> str | None:
        """The command a call of this tool runs, or None when the call is not of this tool."""
        args = call.arguments
        if isinstance(args, str):  # arguments still as JSON text
            try:
                args = json.loads(args)
            except ValueError:
                return None
        if call.name != self.name or not isinstance(args, dict):
            return None
        value = args.get(self.prop)
        if self.kind == "list":
            return list_command_text(value)
        return command_text(value)


def command_text(value: Any) -> str | None:
    """A command from a string or an argv list (``["bash", "-lc", X]`` -> X; other argv: shell-quoted)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        if len(value) == 3 and value[0] in _ARGV_SHELLS and value[1] in ("-c", "-lc", "-l -c"):
            return value[2]
        return shlex.join(value)
    return None


def list_command_text(value: Any) -> str | None:
    """A script from a list of whole command strings (one per line), or a lone string."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return "\n".join(value)
    return None


def _prop_kind(schema: Any, prop: str) -> ShellKind | None:
    """The ShellKind of one property schema named `prop`, or None when it holds no command."""
    if not isinstance(schema, dict):
        return None
    types = schema.get("type")
    types = types if isinstance(types, list) else [types]
    if "string" in types:
        return "string"
    if "array" in types:
        items = schema.get("items")
        if isinstance(items, dict) and items.get("type") == "string":
            return "list" if prop in _LIST_PROPS else "argv"
    return None


def _required(tool: ToolSpec) -> list[str]:
    required = tool.parameters.get("required") if isinstance(tool.parameters, dict) else None
    return [r for r in required if isinstance(r, str)] if isinstance(required, list) else []


def _defaults(props: dict[str, Any], others: list[str]) -> list[tuple[str, Any]] | None:
    """The schema defaults of the other required properties; None when one has none."""
    out = []
    for r in others:
        spec = props.get(r)
        if not isinstance(spec, dict) or "default" not in spec:
            return None  # a required property we could not fill: the call would be refused
        out.append((r, spec["default"]))
    return out


def _candidate(tool: ToolSpec) -> tuple[tuple[int, ...], ShellTool] | None:
    """(score, shell tool) when ``tool`` can run a command, else None. Higher score wins."""
    if tool.kind != "function" or not isinstance(tool.parameters, dict):
        return None
    props = tool.parameters.get("properties")
    if not isinstance(props, dict):
        return None
    required = _required(tool)
    for rank, prop in enumerate(_NAMES):
        kind = _prop_kind(props.get(prop), prop)
        if kind is None:
            continue
        others = [r for r in required if r != prop]
        defaults = _defaults(props, others)
        if defaults is None:
            return None
        name = tool.name.lower()
        hint = next((len(_TOOL_HINTS) - i for i, h in enumerate(_TOOL_HINTS) if name == h), 0)
        partial = int(any(h in name for h in ("bash", "shell", "exec", "command")))
        score = (int(prop in required), int(kind == "string"), -rank, hint, partial, -len(others))
        return score, ShellTool(tool.name, prop, kind, tuple(defaults), tool)
    return None


def _overridden(tools: list[ToolSpec], overrides: tuple[ShellOverride, ...]) -> ShellTool | None:
    """The first override whose tool the request offers (required properties with a default filled)."""
    by_name = {t.name: t for t in tools if t.kind == "function"}
    for o in overrides:
        tool = by_name.get(o.name)
        if tool is None:
            continue
        props = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
        props = props if isinstance(props, dict) else {}
        defaults = _defaults(props, [r for r in _required(tool) if r != o.prop and "default" in (props.get(r) or {})])
        return ShellTool(o.name, o.prop, o.kind, tuple(defaults or ()), tool)
    return None


def find_shell_tool(tools: list[ToolSpec] | None, overrides: tuple[ShellOverride, ...] = ()) -> ShellTool | None:
    """The request's shell tool: an override's tool when the request offers one, else the one
    recognised from the schemas (see the module docstring), or None."""
    found = _overridden(list(tools or []), overrides)
    if found is not None:
        return found
    best: tuple[tuple[int, ...], ShellTool] | None = None
    for tool in tools or []:
        cand = _candidate(tool)
        if cand is not None and (best is None or cand[0] > best[0]):
            best = cand
    return best[1] if best else None


def override_suggestions(tools: list[ToolSpec] | None, limit: int = 3) -> list[ShellOverride]:
    """For a request whose shell tool the detector misses: the overrides that could name it (each
    function tool's string or string-array properties), tools whose names suggest commands first."""
    out: list[tuple[tuple[int, int], ShellOverride]] = []
    for i, tool in enumerate(tools or []):
        props = tool.parameters.get("properties") if isinstance(tool.parameters, dict) else None
        if tool.kind != "function" or not isinstance(props, dict):
            continue
        name = tool.name.lower()
        hinted = int(any(h in name for h in (*_TOOL_HINTS, "command", "cmd")))
        for prop, schema in props.items():
            kind = _prop_kind(schema, prop)
            if kind is not None:
                out.append(((-hinted, i), ShellOverride(tool.name, prop, kind)))
    return [o for _, o in sorted(out, key=lambda x: x[0])][:limit]


# ---- rendering ------------------------------------------------------------------------------
def _fence(body: str, lang: str = "") -> str:
    """A fenced block whose fence is longer than any backtick run inside ``body``."""
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{body}\n{fence}"


def render_command(command: str) -> str:
    """A shell call as the model writes it."""
    return f"```bash\n{command}\n```"


def render_reply(content: str, calls_text: list[str]) -> str:
    """An assistant turn: content, then each call's text, one per line."""
    return "\n".join([p for p in [content] if p] + calls_text)


_CODEX_EXIT = re.compile(r"^(?:Process exited with code|Exit code:?)\s*(-?\d+)\s*$", re.MULTILINE)


def result_parts(content: str) -> tuple[int | None, str]:
    """(exit code or None, output) of a tool result in the shapes harnesses send.

    Codex: ``... Process exited with code N ... Output:\\n<output>`` (or ``Exit code: N``); Codex's
    older JSON ``{"output", "metadata": {"exit_code"}}``; mini-swe-agent's JSON ``{"returncode",
    "output"}``; Claude Code's ``Exit code N\\n<output>`` for a failed command; anything else: the text.
    """
    text = content or ""
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            obj = json.loads(stripped)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and isinstance(obj.get("output"), str):
            code = obj.get("returncode")
            meta = obj.get("metadata")
            if code is None and isinstance(meta, dict):
                code = meta.get("exit_code")
            return (code if isinstance(code, int) else None), obj["output"]
    head, sep, rest = text.partition("Output:\n")
    if sep and "\n" in head:
        m = _CODEX_EXIT.search(head)
        if m:
            return int(m.group(1)), rest
    m = re.match(r"Exit code (-?\d+)\n", text)
    if m:
        return int(m.group(1)), text[m.end():]
    return None, text


def render_result(content: str) -> str:
    """One tool result as the model reads it: the output in a fenced block (exit code when known)."""
    code, output = result_parts(content)
    output = output.strip("\n")
    label = "Output" if code is None else f"Exit code {code}. Output"
    return f"{label}:\n{_fence(output)}"


# ---- parsing --------------------------------------------------------------------------------
def extract_commands(text: str, *, allow_open: bool) -> tuple[str, str | None]:
    """(text without the shell blocks, the command or None). Blocks are joined by newlines."""
    bodies: list[str] = []
    kept: list[str] = []
    pos = 0
    for m in _BLOCK_RE.finditer(text):
        body = m.group(2)
        kept.append(text[pos : m.start()])
        bodies.append(body[:-1] if body.endswith("\n") else body)
        pos = m.end()
    rest = text[pos:]
    if allow_open:
        opened = _OPEN_RE.search(rest)
        body = rest[opened.end():].rstrip() if opened is not None else ""
        if body.endswith("```"):  # closed on the command's own line: "ls```"
            body = body[:-3].rstrip()
        if opened is not None and body.strip():
            bodies.append(body)
            rest = rest[: opened.start()]
    kept.append(rest)
    bodies = [b for b in bodies if b.strip()]
    if not bodies:
        return text, None
    content = "\n".join(p.strip("\n") for p in kept if p.strip())
    return content, "\n".join(bodies)
