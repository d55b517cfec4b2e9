"""Sessions at scale through `harnessrl serve --engine scripted` (a fixed reply after a fixed
latency, standing in for the model): N rollout keys, each a streamed Anthropic conversation of T
turns resending its history, all at once on loopback. Per N: calls, errors (calls that never
completed), typed backpressure answers (429/529 retried after Retry-After), p50/p99 call latency,
calls/s and the server's RSS. Then churn: thousands of short rollouts (register key, 3 calls,
close key) in waves, the server's RSS after each wave (memory must plateau when keys close).
Slow clients (`--slowloris`): that many connections hold half-sent bodies during the N runs.

Run: `.venv/bin/python benchmarks/proxy_sessions.py [--sessions 64 256 1000] [--churn 5000]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import tempfile
import threading
import sys
import time
from pathlib import Path

import httpx
import psutil

from harnessrl.store import RunStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/support: shared scaffolding
from tests.support.loadgen import Outcome, percentile, run_sessions, start_serve  # noqa: E402


class RssSampler:
    """Peak RSS of a process, sampled every `every_s` in a thread."""

    def __init__(self, pid: int, every_s: float = 0.2):
        self.proc = psutil.Process(pid)
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every_s,), daemon=True)

    def now(self) -> int:
        return self.proc.memory_info().rss

    def _run(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            self.peak = max(self.peak, self.now())

    def __enter__(self) -> "RssSampler":
        self.peak = self.now()
        self._thread = threading.Thread(target=self._run, args=(0.2,), daemon=True)
        self._stop.clear()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


class Staller:
    """Stops the server process (SIGSTOP) for `stop_s` after every `run_s`, in a thread, until stop()."""

    def __init__(self, pid: int, run_s: float, stop_s: float):
        self.pid, self.run_s, self.stop_s = pid, run_s, stop_s
        self.stalls = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._done.wait(self.run_s):
            os.kill(self.pid, signal.SIGSTOP)
            try:
                self._done.wait(self.stop_s)
            finally:
                os.kill(self.pid, signal.SIGCONT)
            self.stalls += 1

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def slowloris(port: int, n: int) -> list[socket.socket]:
    """n connections that send headers and half a body, then stall."""
    socks = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(b"POST /v1/messages HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
                  b"content-length: 100000\r\n\r\n{\"messages\": [")
        socks.append(s)
    return socks


def mb(n: int) -> str:
    return f"{n / 2**20:.0f}"


def cpu_s(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def health(url: str) -> dict:
    return httpx.get(url + "/health", timeout=600).json()


def audit(outcomes: list[Outcome], store: RunStore) -> dict[str, int]:
    """Every call the client made, against the store. A conversation's turn t is its rollout's seq t
    (each earlier turn completed, so it was stored exactly once; refused 429/529 attempts are not
    stored). Classes: complete (the client got message_stop); typed (the client got a typed error:
    an HTTP error status with the protocol's error body, or the in-stream error event); no answer
    (a transport error or a stream cut: the client got nothing typed). Each with what the store holds."""
    rows = {(c["rollout_id"], c["seq"]): c["status"]
            for c in store.list_call_summaries(sorted({o.rollout_id for o in outcomes}))}
    out: dict[str, int] = {}
    for o in outcomes:
        stored = rows.get((o.rollout_id, o.turn), "none")
        if o.complete:
            kind = "complete, stored ok" if stored == "ok" else f"LOST: complete, stored {stored}"
        elif o.status >= 400 or o.error.startswith("{'type': 'error'"):
            what = f"{o.status}" if o.status >= 400 else "in-stream"
            kind = f"typed {what}, stored {stored}"
        else:
            kind = f"no answer ({o.error.split(':')[0][:40] or 'stream cut'}), stored {stored}"
        out[kind] = out.get(kind, 0) + 1
    return out


def run_n(url: str, token: str, pid: int, n: int, turns: int, slow: int, port: int, store: RunStore) -> dict:
    held = slowloris(port, slow) if slow else []
    conn0 = health(url).get("connections", {})
    with RssSampler(pid) as rss:
        before = rss.now()
        cpu0 = cpu_s(rss.proc)
        t0 = time.perf_counter()
        outcomes = asyncio.run(run_sessions(url, token, n, turns, prefix=f"n{n}-"))
        wall = time.perf_counter() - t0
        cpu = cpu_s(rss.proc) - cpu0
        after = rss.now()
    for s in held:
        s.close()
    conn1 = health(url).get("connections", {})
    done = [o for o in outcomes if o.complete]
    lat = [o.latency_s for o in done]
    classes = audit(outcomes, store)
    print(f"  {n} sessions, every call against the store: {classes}; transport: "
          f"{ {k: conn1.get(k, 0) - conn0.get(k, 0) for k in ('refused', 'header_timeouts', 'late_reads')} }", flush=True)
    lost = sum(v for k, v in classes.items() if k.startswith("LOST") or (k.startswith("no answer") and
                                                                         k.endswith("stored none")))
    return {"sessions": n, "calls": len(outcomes), "complete": len(done),
            "incomplete": len(outcomes) - len(done), "not_made": n * turns - len(outcomes),
            "typed": sum(v for k, v in classes.items() if k.startswith("typed")),
            "untyped": sum(v for k, v in classes.items() if k.startswith("no answer")), "lost": lost,
            "typed_retries": sum(o.retries for o in outcomes),
            "p50_ms": percentile(lat, 0.5) * 1e3, "p99_ms": percentile(lat, 0.99) * 1e3,
            "calls_per_s": len(done) / wall, "server_cpu_ms": cpu / max(1, len(done)) * 1e3,
            "rss_before_mb": mb(before), "rss_peak_mb": mb(rss.peak), "rss_after_mb": mb(after), "slowloris": slow}


def churn(url: str, token: str, pid: int, total: int, wave: int, turns: int) -> list[tuple[int, str]]:
    proc = psutil.Process(pid)
    points = [(0, mb(proc.memory_info().rss))]
    for start in range(0, total, wave):
        outcomes = asyncio.run(run_sessions(url, token, wave, turns, prefix=f"c{start}-"))
        assert all(o.complete for o in outcomes), [o.error for o in outcomes if not o.complete][:3]
        points.append((start + wave, mb(proc.memory_info().rss)))
    return points


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, nargs="+", default=[64, 256, 1000])
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--latency", type=float, default=0.2, help="scripted engine seconds per call")
    ap.add_argument("--slowloris", type=int, default=200, help="half-sent bodies held during each N run")
    ap.add_argument("--churn", type=int, default=5000, help="short rollouts for the memory plateau (0: skip)")
    ap.add_argument("--wave", type=int, default=500)
    ap.add_argument("--churn-turns", type=int, default=3)
    ap.add_argument("--keep-alive-s", type=float, default=None, help="serve --keep-alive-s (default: serve's)")
    ap.add_argument("--stall", type=float, nargs=2, metavar=("RUN_S", "STOP_S"), default=None,
                    help="a starved server: SIGSTOP it for STOP_S after every RUN_S (what a loaded machine does to "
                         "a low-priority process, made repeatable)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as run_dir:
        extra = ["--keep-alive-s", str(args.keep_alive_s)] if args.keep_alive_s is not None else []
        proc, url, token = start_serve(run_dir, "--scripted-latency-s", str(args.latency), *extra)
        port = int(url.rsplit(":", 1)[1])
        stalls = Staller(proc.pid, *args.stall) if args.stall else None
        store = RunStore(run_dir)
        try:
            print("| sessions | calls made | complete | typed errors | no typed answer | lost | calls not made | "
                  "typed 429/529 retries | p50 ms | p99 ms | calls/s | server CPU ms/call | "
                  "RSS before / peak / after MB | slowloris held |", flush=True)
            print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
            for n in args.sessions:
                r = run_n(url, token, proc.pid, n, args.turns, args.slowloris, port, store)
                print(f"| {r['sessions']} | {r['calls']} | {r['complete']} | {r['typed']} | {r['untyped']} | {r['lost']} | "
                      f"{r['not_made']} | {r['typed_retries']} | {r['p50_ms']:.0f} | "
                      f"{r['p99_ms']:.0f} | {r['calls_per_s']:.0f} | {r['server_cpu_ms']:.1f} | {r['rss_before_mb']} / {r['rss_peak_mb']} / "
                      f"{r['rss_after_mb']} | {r['slowloris']} |", flush=True)
            if args.churn:
                points = churn(url, token, proc.pid, args.churn, args.wave, args.churn_turns)
                print("\nchurn (rollouts done -> server RSS MB): " + ", ".join(f"{n}: {m}" for n, m in points))
        finally:
            if stalls is not None:
                stalls.stop()
            store.close()
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)


if __name__ == "__main__":
    main()
