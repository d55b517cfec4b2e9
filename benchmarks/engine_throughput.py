"""Engine throughput: hf vs vllm backends on the same model, B concurrent requests, generated tokens/s.

    .venv/bin/python benchmarks/engine_throughput.py [--backends hf,vllm,vllm@float32] [--batches 1,16,64]
        [--max-tokens 32] [--prompt-tokens 0] [--model smollm2-135m-instruct] [--json out.json]

A backend may name its dtype after `@` (default `auto`: float32 for hf and for vllm on CPU, bfloat16 for vllm on GPU).
`--prompt-tokens N` pads each prompt to about N tokens (harness calls are 300-3000 tokens: prefill
counts there, not only decoding); the figure is then (prompt + generated) and generated tokens/s.

Each point sends B requests at once through `Engine.generate` (distinct chat prompts, T=0.7,
top_p=1, max_tokens) and reports generated tokens / wall seconds, the time to the last completion.
One warm-up request per backend is not counted. Engine start-up time is reported separately.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from dataclasses import asdict, dataclass

QUESTIONS = [
    "Tell me about the sea.", "Name three colors.", "What is a cat?", "Describe a forest.",
    "Why is the sky blue?", "Write a short poem.", "Explain rain.", "What do birds eat?",
]  # fmt: skip


@dataclass
class Point:
    backend: str
    dtype: str
    batch: int
    tokens: int
    seconds: float
    load1: float  # 1-minute load average after the point (the machine is shared)
    prompt_tokens: int = 0  # all prompts of the point together

    @property
    def tok_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


FILLER = "The shell prints one line per file, and the agent reads each line before it answers. "


def build_prompts(model_dir: str, n: int, prompt_tokens: int = 0) -> list[list[int]]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model_dir)
    pad = FILLER * max(0, prompt_tokens // 17)  # ~17 tokens per filler sentence
    prompts = []
    for i in range(n):
        messages = [{"role": "user", "content": f"{pad}{QUESTIONS[i % len(QUESTIONS)]} (#{i})"}]
        ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        prompts.append(list(ids["input_ids"] if hasattr(ids, "keys") else ids))
    return prompts


def make_backend(spec: str, model_dir: str, max_batch: int, max_model_len: int = 1024):
    from harnessrl.engine.factory import EngineConfig, make_engine, resolved_dtype

    backend, _, dtype = spec.partition("@")
    cfg = EngineConfig(
        type=backend, model=model_dir, max_model_len=max_model_len, max_batch=max_batch, kv_cache_gib=1.0,
        dtype=dtype or "auto",
    )
    return make_engine(cfg), resolved_dtype(cfg)


async def run_point(engine, prompts: list[list[int]], max_tokens: int) -> tuple[int, float]:
    """(generated tokens, wall seconds) of all prompts sent at once."""
    from harnessrl.engine.base import SamplingParams

    params = SamplingParams(temperature=0.7, top_p=1.0, max_tokens=max_tokens)
    start = time.monotonic()
    gens = await asyncio.gather(*(engine.generate(p, params) for p in prompts))
    return sum(len(g.token_ids) for g in gens), time.monotonic() - start


def bench_backend(
    backend: str, model_dir: str, batches: list[int], max_tokens: int, prompt_tokens: int = 0
) -> tuple[list[Point], float]:
    start = time.monotonic()
    engine, dtype = make_backend(backend, model_dir, max(batches), max(1024, prompt_tokens + max_tokens + 256))
    startup = time.monotonic() - start
    points = []
    try:
        prompts = build_prompts(model_dir, max(batches), prompt_tokens)
        asyncio.run(run_point(engine, prompts[:1], 4))  # warm-up
        for batch in batches:
            tokens, seconds = asyncio.run(run_point(engine, prompts[:batch], max_tokens))
            points.append(Point(backend, dtype, batch, tokens, seconds, os.getloadavg()[0],
                                sum(map(len, prompts[:batch]))))
            print(
                f"  {backend} batch {batch}: {tokens} tokens in {seconds:.1f} s = {tokens / seconds:.1f} tok/s"
                f" (prompts {points[-1].prompt_tokens} tokens)"
            )
    finally:
        engine.close()
    return points, startup


def print_table(points: list[Point], startups: dict[str, float]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Engine throughput (generated tokens/s, B concurrent requests)")
    for col in ("backend", "dtype", "batch", "prompt tokens", "tokens", "seconds", "tok/s", "load avg"):
        table.add_column(col, justify="right")
    for p in points:
        table.add_row(
            p.backend,
            p.dtype,
            str(p.batch),
            str(p.prompt_tokens),
            str(p.tokens),
            f"{p.seconds:.1f}",
            f"{p.tok_per_s:.1f}",
            f"{p.load1:.0f}",
        )
    console = Console()
    console.print(table)
    console.print("engine start: " + ", ".join(f"{k} {v:.0f} s" for k, v in startups.items()))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backends", default="hf,vllm")
    parser.add_argument("--batches", default="1,16,64")
    parser.add_argument("--max-tokens", type=int, default=32)
    parser.add_argument("--prompt-tokens", type=int, default=0, help="pad each prompt to about this many tokens")
    parser.add_argument("--model", default=None)
    parser.add_argument("--json", default=None, help="also write the points to this JSON file")
    args = parser.parse_args()

    from harnessrl.engine.model import resolve_model

    model_dir = str(resolve_model(args.model))
    batches = [int(b) for b in args.batches.split(",")]
    points: list[Point] = []
    startups: dict[str, float] = {}
    for backend in args.backends.split(","):
        print(f"{backend}: starting")
        got, startups[backend] = bench_backend(backend, model_dir, batches, args.max_tokens, args.prompt_tokens)
        points += got
    print_table(points, startups)
    if args.json:
        rows = [{**asdict(p), "tok_per_s": p.tok_per_s} for p in points]
        with open(args.json, "w") as fh:
            json.dump({"points": rows, "startup_s": startups, "max_tokens": args.max_tokens,
                       "prompt_tokens": args.prompt_tokens}, fh, indent=2)


if __name__ == "__main__":  # vLLM spawns processes: engine start must stay under this guard
    main()
