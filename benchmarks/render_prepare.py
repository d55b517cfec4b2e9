"""Renderer cost per turn: exact history (incremental) vs rerender (chunk cache) vs a naive full re-tokenise.

A scripted agent conversation sized like Claude Code (a ~40k-char system prompt, 12 tools, ~2 KB
tool results) with the real SmolLM2 tokenizer. Per turn: Conversation.prepare latency and the
number of tokens the tokenizer really produced; the naive baseline tokenises the whole rendering.

    .venv/bin/python benchmarks/render_prepare.py [--turns 20]
"""

from __future__ import annotations

import argparse
import statistics
import time

from harnessrl.render.conversation import Conversation
from harnessrl.render.messages import Message, ToolCall, ToolSpec
from harnessrl.render.tool_formats import render_calls


def build_tools(n: int = 12) -> list[ToolSpec]:
    props = {f"arg{i}": {"type": "string", "description": "an argument " * 20} for i in range(6)}
    return [ToolSpec(f"tool{i}", "Does a thing. " * 60, {"type": "object", "properties": props}) for i in range(n)]


def run(renderer, mode: str, turns: int, tools: list[ToolSpec]) -> tuple[list[float], list[int], list[int]]:
    conv = Conversation(renderer, mode=mode) if mode != "naive" else None
    history = [Message("system", "You are a careful coding agent. " * 1250), Message("user", "Fix the failing test.")]
    lat, tokenized, lengths = [], [], []
    for k in range(turns):
        t0 = time.perf_counter()
        if conv is None:
            ids = renderer.render(history, tools)
            fresh = len(ids)
        else:
            rendered = conv.prepare(history, tools)
            ids, fresh = rendered.ids, rendered.tokenized
        lat.append(time.perf_counter() - t0)
        tokenized.append(fresh)
        lengths.append(len(ids))
        call = ToolCall("x", "tool1", {"arg0": f"step {k}", "arg1": "value"})
        sampled = renderer.encode(render_calls([call], "hermes")) + [renderer.eot_id]
        if conv is not None:
            parsed = conv.commit(rendered, sampled, policy_version=0)
            calls = parsed.tool_calls
        else:
            calls = renderer.parse(sampled, id_seed=str(k)).tool_calls
        history = history + [Message("assistant", "", tool_calls=calls),
                             Message("tool", f"result {k}: " + "some output line\n" * 110, tool_call_id=calls[0].id)]
    return lat, tokenized, lengths


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", type=int, default=20)
    args = ap.parse_args()
    from transformers import AutoTokenizer

    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.render.renderer import Renderer

    renderer = Renderer(AutoTokenizer.from_pretrained(str(smollm2_tokenizer_dir())))
    tools = build_tools()
    print(f"{args.turns} turns, SmolLM2 tokenizer, {len(tools)} tools")
    print(f"{'mode':<9} {'prompt tokens (first/last)':>27} {'tokenised/turn (mean after turn 0)':>36} "
          f"{'prepare ms p50':>15} {'p90':>7}")
    for mode in ("exact", "rerender", "naive"):
        lat, tok, lengths = run(renderer, mode, args.turns, tools)
        later = lat[1:]
        later_sorted = sorted(later)
        p90 = later_sorted[int(0.9 * (len(later_sorted) - 1))]
        print(f"{mode:<9} {lengths[0]:>13}/{lengths[-1]:<13} {statistics.mean(tok[1:]):>36.0f} "
              f"{statistics.median(later) * 1e3:>15.2f} {p90 * 1e3:>7.2f}")


if __name__ == "__main__":
    main()
