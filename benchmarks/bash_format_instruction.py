"""One-shot solve rate of the default model under the bash tool format's instruction variants.

For each held-out task (test + paraphrase splits), render the first request Claude Code's tiny
profile sends (its one-line system prompt, the Bash tool, the task), sample replies with the real
engine at the serving temperature, run the reply's ```bash block in a fresh bwrap sandbox holding
the task's files, then the task's verifier. Prints, per instruction variant: format rate (a block
parsed into a Bash call) and one-shot pass rate with a 95% Wilson interval.

    .venv/bin/python benchmarks/bash_format_instruction.py [--tasks 24] [--samples 3] [--temperature 0.7]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

BASH_TOOL = {"name": "Bash", "description": "Executes a given bash command.",
             "parameters": {"type": "object", "properties": {"command": {"type": "string"},
                                                             "description": {"type": "string"}},
                            "required": ["command"]}}


def main() -> None:
    from harnessrl.engine import EngineConfig, make_engine, resolve_model
    from harnessrl.engine.base import SamplingParams
    from harnessrl.harness.claude_code import TINY_SYSTEM_PROMPT
    from harnessrl.render import bash_format
    from harnessrl.render.messages import Message, ToolSpec
    from harnessrl.render.renderer import Renderer
    from harnessrl.rollout.pass_at_k import wilson_interval
    from harnessrl.sandbox.base import SandboxConfig
    from harnessrl.tasks.loader import interleave_families, load_tasks
    from harnessrl.tasks.validate import open_task_sandbox, run_commands
    from harnessrl.tasks.verifier import run_verifier

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=24, help="tasks per split")
    ap.add_argument("--samples", type=int, default=3)
    ap.add_argument("--temperature", type=float, default=0.7)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--variants", nargs="+", default=["plain", "examples", "turns"])
    args = ap.parse_args()

    variants = {"plain": bash_format.INSTRUCTION, "examples": bash_format.EXAMPLES_INSTRUCTION,
                "turns": bash_format.INSTRUCTION}  # "turns": the bash_examples format (examples as turns)
    renderers = {"turns": Renderer.from_pretrained(resolve_model(None), tool_format="bash_examples")}
    model_dir = resolve_model(None)
    renderer = Renderer.from_pretrained(model_dir, tool_format="bash")
    engine = make_engine(EngineConfig(type="vllm", model=str(model_dir), max_model_len=4096))
    tasks = []
    for split in ("test", "paraphrase"):
        tasks += interleave_families(load_tasks(f"builtin:{split}"))[: args.tasks]
    tool = ToolSpec(**BASH_TOOL)
    params = SamplingParams(temperature=args.temperature, max_tokens=args.max_tokens,
                            stop_token_ids=renderer.stop_ids)
    try:
        for name in args.variants:
            bash_format.INSTRUCTION = variants[name]
            rend = renderers.get(name, renderer)
            prompts = [rend.render([Message("system", TINY_SYSTEM_PROMPT), Message("user", t.instruction)], [tool])
                       for t in tasks]

            async def sample_all() -> list:
                jobs = [engine.generate(p, params) for p in prompts for _ in range(args.samples)]
                return await asyncio.gather(*jobs)

            gens = asyncio.run(sample_all())
            fmt = passed = 0
            for i, gen in enumerate(gens):
                task = tasks[i // args.samples]
                parsed = renderer.parse(gen.token_ids, finish_reason=gen.finish_reason, tools=[tool])
                if not parsed.tool_calls:
                    continue
                fmt += 1
                with open_task_sandbox(task, SandboxConfig(type="bwrap")) as sb:
                    run_commands(sb, (parsed.tool_calls[0].arguments["command"],), timeout_s=20)
                    res = run_verifier(task, sb)
                passed += int(res.status == "ok" and task.passed(res.reward))
            n = len(gens)
            lo, hi = wilson_interval(passed, n)
            print(f"{name:<10} format {fmt}/{n} ({100 * fmt / n:.0f}%)  one-shot pass {passed}/{n} "
                  f"({100 * passed / n:.1f}%, 95% CI {100 * lo:.1f}-{100 * hi:.1f}%)", flush=True)
    finally:
        engine.close()


if __name__ == "__main__":
    main()
