"""How often the real SmolLM2-135M-Instruct writes a parsable call in the `bash` tool format.

Each prompt is what the proxy renders for a first request with Claude Code's tools
(tests/fixtures/harness_tool_schemas.json) in the `bash` format: a one-line system prompt + the
bash format's instruction, and one task of the easy file families. Sampled with the vLLM (CPU) engine;
counted: replies the renderer parses into a shell call (format), and calls whose command names the
task's file and value (on task: a rough upper bound on "would pass").

    PYTHONPATH=src .venv/bin/python benchmarks/bash_format_vs_json.py [--n 64] [--temps 0.7 1.0] [--variants shipped]
    PYTHONPATH=src .venv/bin/python benchmarks/bash_format_vs_json.py --prompt-sizes   # tokenizer only, no engine

--prompt-sizes: the first prompt of each captured real harness run (tests/fixtures/harness_calls,
rendered in the Hermes format) and the same prompt with its JSON tool list replaced by the `bash`
format's instruction, in SmolLM2 tokens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from harnessrl.render import bash_format
from harnessrl.render.messages import Message, ToolSpec

SYSTEM = "You are a coding agent working in a Linux shell."
TASKS = [  # (task, words a command doing it must contain)
    ("Write the word cobalt into a file named answer.txt.", ("cobalt", "answer.txt")),
    ("Create a file called notes.md that contains the text hello.", ("hello", "notes.md")),
    ("Copy the file data.csv to backup.csv.", ("data.csv", "backup.csv")),
    ("Count the lines of log.txt and write the number into count.txt.", ("log.txt", "count.txt")),
    ("Make a directory named build.", ("build",)),
    ("Save the word zebra in a file called animal.txt.", ("zebra", "animal.txt")),
    ("Sort the lines of names.txt into sorted.txt.", ("names.txt", "sorted.txt")),
    ("Write the number 42 into result.txt.", ("42", "result.txt")),
]
VARIANTS = {
    "shipped": bash_format.INSTRUCTION,
    "bare": ("To run a bash command, reply with the command in a ```bash code block. "
             "When the task is done, reply without a code block."),
    "example-task": ("You can run bash commands in the current directory. To run a command, reply with one "
                     "```bash code block. For example, to write the word apple into fruit.txt reply:\n"
                     "```bash\necho apple > fruit.txt\n```\n"
                     "The command's output comes back in the next message. When the task is done, reply "
                     "without a code block."),
}


def claude_code_tools() -> list[ToolSpec]:
    path = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "harness_tool_schemas.json"
    return [ToolSpec(t["name"], "", t["parameters"]) for t in json.loads(path.read_text())["claude-code"]]


async def sample(engine, renderer, prompts, temperature: float, max_tokens: int):
    from harnessrl.engine.base import SamplingParams

    params = SamplingParams(temperature=temperature, max_tokens=max_tokens, stop_token_ids=renderer.stop_ids)
    return await asyncio.gather(*(engine.generate(p, params) for p in prompts))


def prompt_sizes() -> None:
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.render.renderer import Renderer
    from harnessrl.render.tool_formats import _HERMES_HOWTO

    r = Renderer.from_pretrained(smollm2_tokenizer_dir())
    howto = _HERMES_HOWTO.format()
    print("| harness (capture) | first prompt, hermes | same prompt, bash format |")
    print("|---|---:|---:|")
    for path in sorted((Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "harness_calls").glob("*.jsonl")):
        rows = sorted((json.loads(line) for line in path.read_text().splitlines() if line.strip()),
                      key=lambda c: (c["rollout_id"], c["seq"]))
        text = r.decode(rows[0]["prompt_ids"])
        start, end = text.find("# Tools\n\n"), text.find(howto)
        if start < 0 or end < 0:
            print(f"| {path.stem} | {len(rows[0]['prompt_ids'])} | (no tools) |")
            continue
        bash = text[:start] + bash_format.INSTRUCTION + text[end + len(howto):]
        print(f"| {path.stem} | {len(r.encode(text))} | {len(r.encode(bash))} |")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=64, help="samples per (variant, temperature)")
    ap.add_argument("--temps", type=float, nargs="+", default=[0.7, 1.0])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS))
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--show", type=int, default=0, help="print this many replies per config")
    ap.add_argument("--dump", type=Path, default=None, help="write every reply (JSONL) to this file")
    ap.add_argument("--prompt-sizes", action="store_true", help="only print first-prompt sizes (no engine)")
    args = ap.parse_args()
    if args.prompt_sizes:
        prompt_sizes()
        return

    from harnessrl.engine import EngineConfig, make_engine, resolve_model
    from harnessrl.render.renderer import Renderer

    model_dir = resolve_model(None)
    renderer = Renderer.from_pretrained(model_dir, tool_format="bash")
    tools = claude_code_tools()
    engine = make_engine(EngineConfig(type="vllm", model=str(model_dir), max_model_len=2048, kv_cache_gib=1))
    rows = []
    dump = args.dump.open("w") if args.dump else None
    try:
        for variant in args.variants:
            bash_format.INSTRUCTION = VARIANTS[variant]  # the renderer reads it at render time
            jobs = [TASKS[i % len(TASKS)] for i in range(args.n)]
            prompts = [renderer.render([Message("system", SYSTEM), Message("user", task)], tools) for task, _ in jobs]
            for temp in args.temps:
                t0 = time.perf_counter()
                gens = asyncio.run(sample(engine, renderer, prompts, temp, args.max_tokens))
                fmt = on_task = 0
                for (task, words), gen in zip(jobs, gens):
                    parsed = renderer.parse(gen.token_ids, finish_reason=gen.finish_reason, tools=tools)
                    if parsed.tool_calls:
                        fmt += 1
                        command = parsed.tool_calls[0].arguments.get("command", "")
                        on_task += all(w in command for w in words)
                for (task, _), gen in zip(jobs, gens):
                    if dump:
                        dump.write(json.dumps({"variant": variant, "temperature": temp, "task": task,
                                               "finish": gen.finish_reason,
                                               "text": renderer.decode(gen.token_ids)}) + "\n")
                for gen in gens[: args.show]:
                    print("---", repr(renderer.decode(gen.token_ids)))
                row = {"variant": variant, "temperature": temp, "n": args.n, "format": fmt, "on_task": on_task,
                       "prompt_tokens": len(prompts[0]), "seconds": round(time.perf_counter() - t0, 1)}
                rows.append(row)
                print(json.dumps(row), flush=True)
    finally:
        engine.close()
        if dump:
            dump.close()
    print("| instruction | T | parsable ```bash call | command names the task's file and value | prompt tokens |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['variant']} | {r['temperature']} | {r['format']}/{r['n']} | {r['on_task']}/{r['n']} "
              f"| {r['prompt_tokens']} |")


if __name__ == "__main__":
    main()
