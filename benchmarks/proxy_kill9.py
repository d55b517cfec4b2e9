"""Kill -9 of `harnessrl serve` under load, and what SQLite `synchronous=FULL` costs over NORMAL.

1. Crash: N concurrent streamed Anthropic conversations (scripted engine, fixed latency); once
   about half the planned calls came back complete, SIGKILL the server; restart it on the same run
   directory; count calls the clients saw complete (message_stop received) against calls in the
   store: lost (acknowledged but not stored), duplicates (call id or (rollout, seq) twice),
   `PRAGMA integrity_check`, and calls stored but never acknowledged (committed, cut in flight).
2. Cost: the same load without a kill, `--store-sync normal` vs `full`: calls/s and p50/p99.

Run: `.venv/bin/python benchmarks/proxy_kill9.py [--sessions 48 256 1000] [--turns 4]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sqlite3
import tempfile
import sys
import time
from pathlib import Path

from harnessrl.store import RunStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support: shared scaffolding
from tests.support.loadgen import Outcome, percentile, run_sessions, start_serve  # noqa: E402


def crash(n: int, turns: int, latency: float, sync: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        proc, url, token = start_serve(run_dir, "--scripted-latency-s", str(latency), "--store-sync", sync)
        outcomes: list[Outcome] = []

        async def load_then_kill() -> None:
            task = asyncio.create_task(run_sessions(url, token, n, turns, outcomes=outcomes))
            while sum(o.complete for o in outcomes) < n * turns // 2 and not task.done():
                await asyncio.sleep(0.02)
            os.kill(proc.pid, signal.SIGKILL)
            await task

        asyncio.run(load_then_kill())
        proc.wait(30)
        proc2, _, _ = start_serve(run_dir)  # restart on the same directory, then stop it cleanly
        proc2.send_signal(signal.SIGTERM)
        proc2.wait(60)
        store = RunStore(run_dir)
        calls = store.list_call_summaries()
        store.close()
        with sqlite3.connect(run_dir / "harnessrl.sqlite") as db:
            integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
    seen = {o.call_id for o in outcomes if o.complete}
    stored = [c["call_id"] for c in calls]
    seqs = [(c["rollout_id"], c["seq"]) for c in calls]
    return {"sessions": n, "sync": sync, "acknowledged": len(seen), "stored": len(stored),
            "lost": len(seen - set(stored)), "duplicates": (len(stored) - len(set(stored))) + (len(seqs) - len(set(seqs))),
            "stored_not_acknowledged": len(set(stored) - seen),
            # of those, marked undelivered (calls.delivered = 0): what a reader can tell apart
            "not_acknowledged_undelivered": sum(1 for c in calls if c["call_id"] not in seen and not c["delivered"]),
            "integrity": integrity}


def cost(n: int, turns: int, latency: float, sync: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        proc, url, token = start_serve(tmp, "--scripted-latency-s", str(latency), "--store-sync", sync)
        try:
            t0 = time.perf_counter()
            outcomes = asyncio.run(run_sessions(url, token, n, turns))
            wall = time.perf_counter() - t0
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    lat = [o.latency_s for o in outcomes if o.complete]
    return {"sync": sync, "calls_per_s": len(lat) / wall, "p50_ms": percentile(lat, 0.5) * 1e3,
            "p99_ms": percentile(lat, 0.99) * 1e3, "errors": len(outcomes) - len(lat)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, nargs="+", default=[48, 256, 1000])
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--cost-sessions", type=int, default=64)
    ap.add_argument("--cost-turns", type=int, default=10)
    args = ap.parse_args()
    print("| sessions | synchronous | acknowledged | stored | lost | duplicates | stored, not acknowledged | integrity |")
    print("|---|---|---|---|---|---|---|---|")
    for n in args.sessions:
        for sync in ("normal", "full"):
            r = crash(n, args.turns, args.latency, sync)
            print(f"| {r['sessions']} | {r['sync']} | {r['acknowledged']} | {r['stored']} | {r['lost']} | "
                  f"{r['duplicates']} | {r['stored_not_acknowledged']} | {r['integrity']} |", flush=True)
    print(f"\ncost, {args.cost_sessions} sessions x {args.cost_turns} turns, no kill "
          "(median of 3 alternating runs each):")
    runs: dict[str, list[dict]] = {"normal": [], "full": []}
    for _ in range(3):
        for sync in ("normal", "full"):
            runs[sync].append(cost(args.cost_sessions, args.cost_turns, 0.0, sync))
    for sync, rs in runs.items():
        mid = sorted(rs, key=lambda r: r["calls_per_s"])[1]
        print(f"  {sync}: {mid['calls_per_s']:.0f} calls/s, p50 {mid['p50_ms']:.0f} ms, p99 {mid['p99_ms']:.0f} ms, "
              f"errors {mid['errors']} (calls/s of the 3 runs: {[round(r['calls_per_s']) for r in rs]})")


if __name__ == "__main__":
    main()
