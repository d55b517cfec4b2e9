"""Asynchronous vs synchronous rollouts: throughput of the same short training run.

Runs `harnessrl train` in-process twice with the same config and seed, first with
loop.max_policy_lag=0 (collect, then train, then sync) and then with loop.max_policy_lag=1 (the next
step's rollouts run while this step trains and syncs). Reports, over the step loop (setup and the
step-0 record excluded): wall seconds, rollouts per hour, trained tokens per hour, the per-phase
times (for the async run "rollout" is the time spent waiting for rollouts), and the trained
tokens' policy-lag histogram.

    .venv/bin/python benchmarks/async_throughput.py [--steps 4] [--groups 2] [--n 8] [--out results.json]
        [--model tiny:256:4]   # a random Llama with the SmolLM2 tokenizer (hidden 256, 4 layers) instead of SmolLM2
        [--kl 0.01]            # keep every tree in the update (a random model earns no reward signal)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TokenTask:
    """A task for the in-process collector: a token prompt."""

    id: str
    prompt: tuple[int, ...]
    split: str = "train"
    family: str = "tokens"
    category: str = "tokens"

    def passed(self, reward):
        return reward is not None and reward >= 0.5


def token_tasks(cfg):
    rng = random.Random(0)
    make = lambda i, split: TokenTask(f"{split}{i}", tuple(rng.randrange(100, 5000) for _ in range(200)), split)  # noqa: E731
    return [make(i, "train") for i in range(8)], [make(i, "test") for i in range(2)]


class EngineCollector:
    """`--collector engine`: multi-turn rollouts straight against the engine, no proxy/harness/
    sandbox; each turn's "tool" is a sleep of tool_s seconds and returns 32 fixed tokens. Reward: 1
    when the first sampled token is even (a per-task learnable signal). Records like the proxy."""

    def __init__(self, engine, store, cfg, tool_s: float, turns: int):
        self.engine, self.store, self.cfg, self.tool_s, self.turns = engine, store, cfg, tool_s, turns

    def run(self, plans, progress=None):
        asyncio.run(self._all(plans, progress))

    async def _all(self, plans, progress):
        await asyncio.gather(*(self._one(p, i, progress) for p in plans for i in range(p.n)))

    async def _one(self, plan, idx, progress):
        from harnessrl.engine import SamplingParams
        from harnessrl.store.records import PROMPT, CallRecord, RolloutRecord

        rid = f"{plan.group_id}:{idx}"
        hist, first = list(plan.task.prompt), None
        for turn in range(self.turns):
            t0 = time.time()
            params = SamplingParams(temperature=1.0, max_tokens=self.cfg.serve.max_tokens, route_key=rid)
            gen = await self.engine.generate(hist, params)
            first = first if first is not None else (gen.token_ids[:1] or [1])[0]
            self.store.insert_call(CallRecord(
                call_id=f"{rid}-{uuid.uuid4().hex[:8]}", rollout_id=rid, seq=turn, protocol="openai.chat",
                prompt_ids=list(hist), sampled_ids=list(gen.token_ids), logprobs=list(gen.logprobs),
                prompt_provenance=[PROMPT] * len(hist), policy_version=gen.policy_version, temperature=1.0,
                top_p=1.0, finish_reason=gen.finish_reason, t_start=t0, t_end=time.time()))
            hist = hist + list(gen.token_ids) + list(range(300, 332))
            await asyncio.sleep(self.tool_s)
        self.store.put_rollout(RolloutRecord(
            rollout_id=rid, task_id=plan.task.id, harness=plan.harness, group_id=plan.group_id, status="ok",
            reward=float(first % 2 == 0), step=plan.step, sample_idx=idx, split=plan.split, call_count=self.turns))
        if progress:
            progress(1)

    def close(self):
        pass


def run(lag: int, args, root: Path) -> dict:
    from rich.console import Console

    from harnessrl.config import load_config
    from harnessrl.run.loop import run_training

    ov = [f"model.path={args.model_dir}" if args.model_dir else "model.path=null", f"algorithm.kl_coef={args.kl}",
          f"loop.max_policy_lag={lag}", f"loop.steps={args.steps}", f"loop.groups_per_step={args.groups}",
          f"loop.n_per_group={args.n}", "loop.eval_size=0", f"serve.max_tokens={args.max_tokens}", "loop.max_turns=2",
          f"loop.concurrency={args.concurrency}", "harnesses=[{name: builtin, weight: 1}]",
          "tasks.families=[write_word]", f"sandbox.type={args.sandbox}", "engine.type=hf",
          "algorithm.token_budget=8192", "optimizer.lr=3e-5", "output.tensorboard=false", "filters.truncated=keep",
          "output.checkpoint_every=1000", "output.keep_checkpoints=1", f"output.run_dir={root / f'lag{lag}'}"]
    kw = {}
    if args.collector == "engine":
        kw = {"collector_factory": lambda cfg, engine, store, run_dir: EngineCollector(engine, store, cfg, args.tool_s,
                                                                                     args.turns),
              "tasks_loader": token_tasks}
    t0 = time.monotonic()
    res = run_training(load_config(None, ov), console=Console(quiet=True), **kw)
    total = time.monotonic() - t0
    steps = [r for r in res.records if r["step"] >= 1]
    wall = sum(sum(r["time"].values()) for r in steps)
    rollouts = sum(sum(r.get("rollouts", {}).values()) for r in steps)
    tokens = sum(r.get("tokens_trained", 0.0) for r in steps)
    phases: dict[str, float] = {}
    lag_hist: dict[str, float] = {}
    for r in steps:
        for k, v in r["time"].items():
            phases[k] = round(phases.get(k, 0.0) + v, 1)
        for k, v in r.get("policy_lag_tokens", {}).items():
            lag_hist[k] = lag_hist.get(k, 0.0) + v
    return {"max_policy_lag": lag, "steps": len(steps), "step_loop_s": round(wall, 1), "run_total_s": round(total, 1),
            "rollouts": rollouts, "trained_tokens": tokens, "rollouts_per_h": round(3600 * rollouts / wall, 1),
            "trained_tokens_per_h": round(3600 * tokens / wall), "phases_s": phases, "lag_tokens": lag_hist,
            "reward": [r.get("reward", {}) for r in steps]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--groups", type=int, default=2)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--sandbox", default="bwrap" if shutil.which("bwrap") else "local")
    ap.add_argument("--model", default="default", help="default (SmolLM2-135M) or tiny:HIDDEN:LAYERS")
    ap.add_argument("--kl", type=float, default=0.0)
    ap.add_argument("--collector", choices=["runner", "engine"], default="runner",
                    help="runner: proxy + sandbox + builtin harness; engine: in-process turns (see EngineCollector)")
    ap.add_argument("--tool-s", type=float, default=2.0, help="engine collector: seconds per tool call")
    ap.add_argument("--turns", type=int, default=3, help="engine collector: turns per rollout")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="harnessrl-async-"))
    args.model_dir = None
    if args.model.startswith("tiny:"):
        from harnessrl.engine import make_tiny_model

        _, hidden, layers = args.model.split(":")
        args.model_dir = str(make_tiny_model(root / "model", hidden_size=int(hidden), num_layers=int(layers),
                                             num_heads=4, seed=0))
    try:
        out = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "args": {k: v for k, v in vars(args).items() if k != "model_dir"},
               "sync": run(0, args, root), "async": run(1, args, root)}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    s, a = out["sync"], out["async"]
    out["speedup_rollouts_per_h"] = round(a["rollouts_per_h"] / s["rollouts_per_h"], 2)
    out["speedup_trained_tokens_per_h"] = round(a["trained_tokens_per_h"] / s["trained_tokens_per_h"], 2)
    print(json.dumps(out, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
