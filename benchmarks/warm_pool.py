"""Warm pool on/off, per harness, in one run (issue 43 item 4), and where a rollout's time goes.

Each round runs one batch of rollouts of a small task ("write hello into hello.txt", verified)
through the real runner (`run_plans`: bwrap, the real proxy, the harness as a black box, the
verifier), with a scripted zero-latency policy (benchmarks/harness_overhead.py: one tool call, then
an answer), once with the warm pool off and once on (`RunOptions.warm`), alternating off/on so load
from other work hits both alike. Prints per harness and mode: batch wall (median over rounds), the
on/off ratio, and per rollout (means): total, sandbox start (with the pool: the wait for a sandbox
made ahead), harness, verifier, model time (the proxy's calls, first byte to last), the harness's
non-model wall (harness - model) and its CPU seconds (user + system of the sandboxed process tree,
from the launcher), and the statuses.

    .venv/bin/python benchmarks/warm_pool.py [--harness codex claude-code openclaw:small]
        [--n 4] [--concurrency 2] [--warm 2] [--rounds 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from harness_overhead import policy_for  # noqa: E402

DEFAULT = ["codex", "claude-code", "openclaw:small"]
VERIFY = ("import json, pathlib\np = pathlib.Path('hello.txt')\n"
          "print(json.dumps({'hello': float(p.is_file() and p.read_text().strip() == 'hello')}))\n")


def task():
    from harnessrl.tasks.model import Task, Verifier

    return Task(id="hello", instruction="Write hello into hello.txt.", files={"README.md": b"Say hello.\n"},
                verifier=Verifier("checks", "python3 .verifier/verify.py", files={"verify.py": VERIFY.encode()}))


def batch(spec, adapter, server, store, n, concurrency, warm, round_no) -> dict:
    from harnessrl.rollout.jobs import RunOptions, run_plans
    from harnessrl.rollout.plan import plan_cross
    from harnessrl.rollout.proxy_link import LocalProxy
    from harnessrl.sandbox import SandboxConfig

    plans = plan_cross([task()], [spec], n, step=round_no, attempt=warm, split=f"w{warm}")
    opts = RunOptions(sandbox_cfg=SandboxConfig(type="bwrap"), max_turns=6, harness_timeout_s=300.0, warm=warm,
                      step=round_no)
    t0 = time.monotonic()
    records = run_plans(plans, proxy=LocalProxy(server), store=store, opts=opts, adapters={spec: adapter},
                        concurrency=concurrency)
    wall = time.monotonic() - t0
    rows = []
    for r in records:
        calls = store.list_calls([r.rollout_id])
        model = sum(max(0.0, c.t_end - c.t_start) for c in calls if c.t_end and c.t_start)
        cpu = (r.meta.get("harness_meta") or {}).get("cpu_s") or {}
        rows.append({"total": r.durations.get("total_s", 0.0), "sandbox": r.durations.get("sandbox_s", 0.0),
                     "harness": r.durations.get("harness_s", 0.0), "verifier": r.durations.get("verifier_s", 0.0),
                     "model": model, "cpu": float(cpu.get("harness_user_s", 0.0) + cpu.get("harness_system_s", 0.0)),
                     "calls": len(calls), "status": r.status, "reward": r.reward})
    return {"wall": wall, "rows": rows}


def mean(rows, key) -> float:
    return statistics.fmean(r[key] for r in rows) if rows else 0.0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--harness", nargs="*", default=DEFAULT)
    p.add_argument("--n", type=int, default=4, help="rollouts per batch")
    p.add_argument("--concurrency", type=int, default=2)
    p.add_argument("--warm", type=int, default=2, help="the pool's depth when on")
    p.add_argument("--rounds", type=int, default=2, help="off/on pairs per harness")
    args = p.parse_args()
    from harnessrl.engine.model import resolve_model
    from harnessrl.engine.scripted import ScriptedEngine
    from harnessrl.harness import make_harness
    from harnessrl.proxy.server import ProxyServer
    from harnessrl.render.renderer import Renderer
    from harnessrl.store import RunStore

    model_dir = resolve_model(None)
    renderer = Renderer.from_pretrained(model_dir)
    print(f"n={args.n} rollouts per batch, concurrency {args.concurrency}, warm pool depth {args.warm}, "
          f"{args.rounds} off/on rounds; per-rollout columns are means")
    print("| harness | pool | batch wall s (median) | on/off | total s | sandbox s | harness s | verifier s "
          "| model s | harness non-model s | harness CPU s | calls | statuses |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for spec in args.harness:
        name = spec.split(":")[0]
        adapter = make_harness(spec)
        problem = adapter.preflight()
        if problem:
            print(f"| {spec} | - | skipped: {problem} |", flush=True)
            continue
        engine = ScriptedEngine(policy_for(name, renderer), max_model_len=131072, model_path=str(model_dir))
        tmp = Path(tempfile.mkdtemp(prefix="warm-bench-"))
        store = RunStore(tmp / "run")
        server = ProxyServer(engine, store, renderer).start()
        res: dict[int, list[dict]] = {0: [], args.warm: []}
        try:
            for rnd in range(args.rounds):
                for warm in (0, args.warm) if rnd % 2 == 0 else (args.warm, 0):
                    res[warm].append(batch(spec, adapter, server, store, args.n, args.concurrency, warm, rnd))
        finally:
            server.stop()
        walls = {w: statistics.median(b["wall"] for b in bs) for w, bs in res.items()}
        for warm, bs in res.items():
            rows = [r for b in bs for r in b["rows"]]
            ratio = walls[warm] / walls[0] if walls[0] else 0.0
            statuses = Counter(f"{r['status']}:{r['reward']}" for r in rows)
            print(f"| {spec} | {'on' if warm else 'off'} | {walls[warm]:.1f} | {ratio:.2f} | {mean(rows, 'total'):.2f} "
                  f"| {mean(rows, 'sandbox'):.3f} | {mean(rows, 'harness'):.2f} | {mean(rows, 'verifier'):.2f} "
                  f"| {mean(rows, 'model'):.3f} | {mean(rows, 'harness') - mean(rows, 'model'):.2f} "
                  f"| {mean(rows, 'cpu'):.2f} | {mean(rows, 'calls'):.1f} "
                  f"| {', '.join(f'{k} x{v}' for k, v in sorted(statuses.items()))} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
