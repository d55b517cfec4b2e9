"""Kill -9 of `harnessrl serve` under load: every call a client saw complete is in the store after
a restart on the same run directory, nothing is stored twice, the database is intact, and the
restarted server continues each rollout's sequence. (benchmarks/proxy_kill9.py: the big version.)"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3

import httpx

from tests.support.loadgen import Outcome, run_sessions, start_serve
from harnessrl.store import RunStore


def test_kill9_mid_load_loses_no_acknowledged_call(tmp_path):
    run_dir = tmp_path / "run"
    proc, url, token = start_serve(run_dir, "--scripted-latency-s", "0.3")
    outcomes: list[Outcome] = []

    async def load_then_kill() -> None:
        task = asyncio.create_task(run_sessions(url, token, n_sessions=16, turns=8, outcomes=outcomes))
        for _ in range(6000):  # until 40 calls came back complete (bounded wait; slow on a loaded machine)
            if sum(o.complete for o in outcomes) >= 40 or task.done():
                break
            await asyncio.sleep(0.1)
        os.kill(proc.pid, signal.SIGKILL)
        await task

    try:
        asyncio.run(load_then_kill())
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    seen = {o.call_id for o in outcomes if o.complete}
    cut = [o for o in outcomes if not o.complete]
    assert len(seen) >= 40 and cut, "the kill must land mid-load"

    proc2, url2, token2 = start_serve(run_dir)  # the same run directory
    try:
        r = httpx.post(url2 + "/admin/rollouts", json={"rollout_id": "s0"}, headers={"Authorization": f"Bearer {token2}"})
        key = r.json()["key"]
        r = httpx.post(f"{url2}/r/{key}/v1/messages", timeout=60,
                       json={"max_tokens": 8, "messages": [{"role": "user", "content": "again"}]})
        assert r.status_code == 200
    finally:
        proc2.send_signal(signal.SIGTERM)
        assert proc2.wait(60) == 0

    store = RunStore(run_dir)
    calls = store.list_call_summaries()
    store.close()
    stored = [c["call_id"] for c in calls]
    assert seen <= set(stored)  # 0 acknowledged calls lost
    assert len(stored) == len(set(stored))  # no call twice
    seqs = [(c["rollout_id"], c["seq"]) for c in calls]
    assert len(seqs) == len(set(seqs))
    s0 = [c["seq"] for c in calls if c["rollout_id"] == "s0"]
    assert s0 == list(range(len(s0)))  # the restarted server continued s0's sequence
    with sqlite3.connect(run_dir / "harnessrl.sqlite") as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
