#!/usr/bin/env python3
"""harnessrl's builtin reference agent: a small standalone coding agent for one task.

It runs inside the sandbox as its own process (stdlib + the `openai` SDK only, no project code),
talks to an OpenAI-compatible endpoint (the harnessrl proxy) and works in the current directory.

Two action formats (--format; harnessrl's harness/action_format.py names them):
  bash  (default; fits small models) - each reply holds one fenced ```bash block; the agent runs
        it and sends back the output. A reply without a block is the final answer. ("text", its
        older name, is accepted.)
  tools native OpenAI tool calls: read_file, write_file, list_files, run_shell. A reply without
        tool calls is the final answer. ("tool" is accepted for tools.)
It stops on a final answer or after --max-turns model calls and prints one JSON summary line.

  python builtin_agent.py --base-url http://127.0.0.1:8000/r/KEY/v1 --api-key KEY --model m \
      --task "Write the word apple into a.txt" [--task-file PATH] [--format bash|tools]
"""

import argparse
import json
import os
import re
import subprocess
import sys
from typing import TYPE_CHECKING, TypedDict

import openai

if TYPE_CHECKING:
    from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming

TEXT_SYSTEM = "You solve tasks by running bash commands in the current directory. Reply with one bash command in a ```bash code block. When the task is done, reply without a code block."

# Worked examples shown before the task as earlier turns (command, output, "Done."): a small model
# follows them far more reliably than a description of the format. No built-in task uses these names.
TEXT_EXAMPLES = [
    ("Copy notes.md to backup.md.", "cp notes.md backup.md"),
    ("Delete the file old.md.", "rm old.md"),
    ("Make a folder called pics with a file pics/a.md that says hi.", "mkdir -p pics && echo hi > pics/a.md"),
    ("In plan.md, change the word red to blue.", "sed -i 's/red/blue/g' plan.md"),
    ("Save the lines of people.tsv that contain Bob into bob.md.", "grep Bob people.tsv > bob.md"),
    ("Save the first two lines of table.tsv into top.md.", "head -n 2 table.tsv > top.md"),
    ("Count the words in story.md and save the number in words.md.", "wc -w < story.md > words.md"),
    ("Write the word hello into a file named greeting.md.", "echo hello > greeting.md"),
]

TOOLS_SYSTEM = """You are an agent that completes tasks on files in the current directory.
Use the tools to inspect and change files. When the task is done, reply with a short summary."""

OBSERVATION = "Exit code {code}. Output:\n```\n{output}\n```\nIf the task is done, reply with no code block. Otherwise reply with the next command."
DONE = "Done."
# the action formats, as harness/action_format.py ActionFormat names them (this script imports no
# project code, so it keeps this copy; its tests check the two agree), and the older spellings
ACTION_FORMATS = ("bash", "tools")
FORMAT_ALIASES = {"tool": "tools", "text": "bash"}
REPLY_TOKENS = 256  # the max_tokens each request asks (--max-tokens; the white-box loop asks the same)
NO_BLOCK_FINAL = "final"
MAX_OUTPUT = 2000
BASH_BLOCK = re.compile(r"```(?:bash|sh|shell)?[ \t]*\n(.*?)```", re.DOTALL)


def _tool(name, description, **params):
    props = {k: {"type": "string", "description": v} for k, v in params.items()}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": {
        "type": "object", "properties": props, "required": list(params)}}}


TOOLS = [
    _tool("read_file", "Read a text file.", path="file path"),
    _tool("write_file", "Write text to a file (replaces it).", path="file path", content="the new text"),
    _tool("list_files", "List the files in a directory.", path="directory path, '.' for the current one"),
    _tool("run_shell", "Run a bash command and return its output.", command="the command"),
]


def clip(text):
    return text if len(text) <= MAX_OUTPUT else text[:MAX_OUTPUT // 2] + "\n...[cut]...\n" + text[-MAX_OUTPUT // 2:]


def run_shell(command, timeout_s=60):
    try:
        p = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=timeout_s)
        return p.returncode, clip(p.stdout + p.stderr)
    except subprocess.TimeoutExpired:
        return 124, f"command timed out after {timeout_s}s"


def call_tool(name, args):
    try:
        if name == "read_file":
            with open(args["path"], encoding="utf-8", errors="replace") as f:
                return clip(f.read())
        if name == "write_file":
            os.makedirs(os.path.dirname(args["path"]) or ".", exist_ok=True)
            with open(args["path"], "w", encoding="utf-8") as f:
                f.write(args["content"])
            return f"wrote {len(args['content'])} characters to {args['path']}"
        if name == "list_files":
            return "\n".join(sorted(os.listdir(args.get("path") or ".")))
        if name == "run_shell":
            code, out = run_shell(args["command"])
            return f"exit code {code}\n{out}"
        return f"unknown tool {name!r}"
    except (OSError, KeyError, TypeError) as e:
        return f"error: {e}"


def text_turn(reply, messages, stats):
    """Run the reply's bash block; returns False when the reply is the final answer."""
    messages.append({"role": "assistant", "content": reply.content or ""})
    match = BASH_BLOCK.search(reply.content or "")
    if not match:
        return False
    code, output = run_shell(match.group(1).strip())
    stats["commands"] += 1
    messages.append({"role": "user", "content": OBSERVATION.format(code=code, output=output)})
    return True


def tools_turn(reply, messages, stats):
    """Run the reply's tool calls; returns False when there are none (final answer)."""
    calls = reply.tool_calls or []
    messages.append({"role": "assistant", "content": reply.content, "tool_calls": [
        {"id": c.id, "type": "function", "function": {"name": c.function.name, "arguments": c.function.arguments}}
        for c in calls]} if calls else {"role": "assistant", "content": reply.content or ""})
    for c in calls:
        try:
            args = json.loads(c.function.arguments or "{}")
        except json.JSONDecodeError as e:
            args, result = None, f"error: arguments are not JSON ({e})"
        if args is not None:
            result = call_tool(c.function.name, args if isinstance(args, dict) else {})
        stats["commands"] += 1
        messages.append({"role": "tool", "tool_call_id": c.id, "content": result})
    return bool(calls)


def first_messages(fmt, task):
    """System prompt, (bash format) the worked examples ending with a finished task, then the task."""
    if fmt == "tools":
        return [{"role": "system", "content": TOOLS_SYSTEM}, {"role": "user", "content": task}]
    messages = [{"role": "system", "content": TEXT_SYSTEM}]
    for example, command in TEXT_EXAMPLES:
        messages += [{"role": "user", "content": example}, {"role": "assistant", "content": f"```bash\n{command}\n```"},
                     {"role": "user", "content": OBSERVATION.format(code=0, output="")},
                     {"role": "assistant", "content": DONE}]
    return messages + [{"role": "user", "content": task}]


class Stats(TypedDict, total=False):
    """What the agent prints as its last stdout line."""

    turns: int
    commands: int
    stop: str
    final_message: str
    error: str


def run(args: argparse.Namespace, task: str) -> Stats:
    client = openai.OpenAI(base_url=args.base_url, api_key=args.api_key, max_retries=3, timeout=args.call_timeout)
    messages = first_messages(args.format, task)
    stats: Stats = {"turns": 0, "commands": 0, "stop": "max_turns", "final_message": ""}
    params: CompletionCreateParamsNonStreaming = {"model": args.model, "messages": messages,
                                                  "max_tokens": args.max_tokens}
    if args.format == "tools":
        params["tools"] = TOOLS
    if args.temperature is not None:  # else none is sent: the proxy's serve.default_temperature applies
        params["temperature"] = args.temperature
    while stats["turns"] < args.max_turns:
        try:
            response = client.chat.completions.create(**params)
        except openai.BadRequestError as e:  # e.g. the conversation no longer fits the context
            stats["stop"], stats["error"] = "rejected", str(e)[:500]
            break
        stats["turns"] += 1
        reply = response.choices[0].message
        stats["final_message"] = reply.content or ""
        step = text_turn if args.format == "bash" else tools_turn
        if not step(reply, messages, stats):
            stats["stop"] = NO_BLOCK_FINAL
            break
    return stats


def glue_values(argv):
    """'--opt VALUE' -> '--opt=VALUE' so that values starting with '-' (API keys do) parse."""
    out, i = [], 0
    while i < len(argv):
        if argv[i].startswith("--") and "=" not in argv[i] and i + 1 < len(argv) and argv[i] != "--":
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL"))
    p.add_argument("--api-key", default=os.environ.get("OPENAI_API_KEY", "none"))
    p.add_argument("--model", default=os.environ.get("HARNESSRL_MODEL", "default"))
    p.add_argument("--task", help="the task text")
    p.add_argument("--task-file", help="a file holding the task text")
    p.add_argument("--max-turns", type=int, default=5)
    p.add_argument("--format", choices=(*ACTION_FORMATS, *FORMAT_ALIASES), default="bash",
                   help="the action format: bash (a ```bash block per reply; older name: text) | tools "
                        "(native tool calls)")
    p.add_argument("--workspace", help="directory to work in (default: the current one)")
    p.add_argument("--temperature", type=float, default=None,
                   help="sent with every call (default: none, so the server's default temperature applies)")
    p.add_argument("--max-tokens", type=int, default=REPLY_TOKENS)
    p.add_argument("--call-timeout", type=float, default=600.0)
    args = p.parse_args(glue_values(sys.argv[1:] if argv is None else argv))
    args.format = FORMAT_ALIASES.get(args.format, args.format)
    if not args.base_url or not (args.task or args.task_file):
        p.error("--base-url (or OPENAI_BASE_URL) and --task or --task-file are required")
    task = args.task
    if args.task_file:
        with open(args.task_file, encoding="utf-8") as f:
            task = f.read()
    if args.workspace:
        os.chdir(args.workspace)
    try:
        stats = run(args, task)
    except openai.OpenAIError as e:  # the endpoint is unreachable or broken: a harness failure
        print(json.dumps({"stop": "error", "error": str(e)[:500], "final_message": ""}))
        return 1
    print(json.dumps(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
