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
import signal
import socket
import tempfile
import threading
import time

import psutil

from harnessrl.proxy.loadgen import percentile, run_sessions, start_serve


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


def run_n(url: str, token: str, pid: int, n: int, turns: int, slow: int, port: int) -> dict:
    held = slowloris(port, slow) if slow else []
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
    done = [o for o in outcomes if o.complete]
    lat = [o.latency_s for o in done]
    kinds: dict[str, int] = {}
    for o in outcomes:
        if not o.complete:
            kind = f"{o.status} {o.error.split(':')[0][:60]}"
            kinds[kind] = kinds.get(kind, 0) + 1
    if kinds:
        print(f"  errors at {n} sessions: {kinds}", flush=True)
    return {"sessions": n, "calls": len(outcomes), "complete": len(done),
            "errors": len(outcomes) - len(done) + (n * turns - len(outcomes)),
            "typed_retries": sum(o.retries for o in outcomes),
            "p50_ms": percentile(lat, 0.5) * 1e3, "p99_ms": percentile(lat, 0.99) * 1e3,
            "calls_per_s": len(done) / wall, "server_cpu_ms": cpu / max(1, len(done)) * 1e3, "rss_before_mb": mb(before), "rss_peak_mb": mb(rss.peak),
            "rss_after_mb": mb(after), "slowloris": slow}


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
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as run_dir:
        proc, url, token = start_serve(run_dir, "--scripted-latency-s", str(args.latency))
        port = int(url.rsplit(":", 1)[1])
        try:
            print("| sessions | calls | errors | typed 429/529 retries | p50 ms | p99 ms | calls/s | server CPU ms/call | "
                  "RSS before / peak / after MB | slowloris held |")
            print("|---|---|---|---|---|---|---|---|---|---|")
            for n in args.sessions:
                r = run_n(url, token, proc.pid, n, args.turns, args.slowloris, port)
                print(f"| {r['sessions']} | {r['calls']} | {r['errors']} | {r['typed_retries']} | {r['p50_ms']:.0f} | "
                      f"{r['p99_ms']:.0f} | {r['calls_per_s']:.0f} | {r['server_cpu_ms']:.1f} | {r['rss_before_mb']} / {r['rss_peak_mb']} / "
                      f"{r['rss_after_mb']} | {r['slowloris']} |", flush=True)
            if args.churn:
                points = churn(url, token, proc.pid, args.churn, args.wave, args.churn_turns)
                print("\nchurn (rollouts done -> server RSS MB): " + ", ".join(f"{n}: {m}" for n, m in points))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(120)


if __name__ == "__main__":
    main()
