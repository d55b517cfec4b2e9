"""Rollouts per minute of the runner with the builtin harness on the built-in suite, at several
concurrency levels.

    python benchmarks/rollout_throughput.py [--policy scripted|hf|vllm] [--sandbox bwrap|local]
                                            [--tasks builtin:test] [--per-level 12] [--levels 1 2 4]

`scripted` (default) answers every task with its reference solution in one ```bash block, then
"Done." (2 model calls per rollout): the figure is the runner's own cost (sandbox, agent process,
proxy, verifier, store). `hf` / `vllm` use SmolLM2-135M-Instruct: the figure then includes decoding.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import warnings
from pathlib import Path


def build_policy(kind: str, tasks: list, renderer) -> object:
    if kind == "scripted":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.rollout.solver import solver_engine

        return solver_engine(renderer, tasks)
    from harnessrl.engine import EngineConfig, make_engine

    return make_engine(EngineConfig(type=kind, max_model_len=4096))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--policy", choices=("scripted", "hf", "vllm"), default="scripted")
    p.add_argument("--sandbox", choices=("bwrap", "local"), default="bwrap")
    p.add_argument("--tasks", default="builtin:test")
    p.add_argument("--per-level", type=int, default=12, help="rollouts per concurrency level")
    p.add_argument("--levels", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--max-turns", type=int, default=4)
    args = p.parse_args()
    warnings.simplefilter("ignore")

    from harnessrl.engine.model import resolve_model, smollm2_tokenizer_dir
    from harnessrl.proxy.server import ProxyServer
    from harnessrl.render.renderer import Renderer
    from harnessrl.rollout.jobs import run_groups
    from harnessrl.sandbox.base import SandboxConfig
    from harnessrl.store import RunStore
    from harnessrl.tasks import load_tasks

    tasks = load_tasks(args.tasks)
    model_dir = smollm2_tokenizer_dir() if args.policy == "scripted" else resolve_model(None)
    renderer = Renderer.from_pretrained(str(model_dir))
    engine = build_policy(args.policy, tasks, renderer)
    store = RunStore(tempfile.mkdtemp(prefix="bench-rollouts-"))
    server = ProxyServer(engine, store, renderer).start()
    print(f"policy={args.policy} sandbox={args.sandbox} tasks={args.tasks} rollouts/level={args.per_level}")
    print(f"{'concurrency':>11} {'rollouts':>8} {'ok':>4} {'passed':>6} {'wall_s':>8} {'rollouts/min':>12} {'calls':>6}")
    try:
        for level in args.levels:
            chosen = [tasks[i % len(tasks)] for i in range(args.per_level)]
            t0 = time.monotonic()
            records = run_groups(chosen, ["builtin"], 1, proxy=server, store=store,
                                 sandbox_cfg=SandboxConfig(type=args.sandbox), concurrency=level,
                                 max_turns=args.max_turns, step=level, progress=False)
            wall = time.monotonic() - t0
            ok = sum(r.status == "ok" for r in records)
            passed = sum(r.reward == 1.0 for r in records)
            calls = sum(r.call_count for r in records)
            print(f"{level:>11} {len(records):>8} {ok:>4} {passed:>6} {wall:>8.1f} {60 * len(records) / wall:>12.1f} {calls:>6}")
    finally:
        server.stop()
        getattr(engine, "close", lambda: None)()
        store.close()


if __name__ == "__main__":
    main()
