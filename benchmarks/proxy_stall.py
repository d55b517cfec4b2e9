"""Does one large request stall the proxy for everyone else? `/health` latency while a 4 MB
request is served (issue 20, hole 6).

The server is a real ProxyServer (FixedLatencyEngine, the real SmolLM2 renderer, a real RunStore)
in this process, on loopback. For each big request (a 4 MB Anthropic `count_tokens`, a 4 MB
`/v1/messages`), a thread sends it while the main thread probes `GET /health` back to back; the
script prints the probes' median and max latency during the big request, next to an idle baseline.
A proxy whose event loop is blocked (JSON parse, rendering or tokenising on the loop, or a
tokenizer call that holds the GIL) shows a max close to the big request's own duration.

Run: `.venv/bin/python benchmarks/proxy_stall.py [--mb 4] [--repeat 2]`.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx

from harnessrl.engine.model import smollm2_tokenizer_dir
from harnessrl.engine.scripted import FixedLatencyEngine
from harnessrl.proxy.server import ProxyServer
from harnessrl.render.renderer import Renderer
from harnessrl.store import RunStore


def big_body(mb: float) -> dict:
    words = "the quick brown fox jumps over the lazy dog, then reads a.py and runs the tests. "
    text = (words * int(mb * 1024 * 1024 / len(words) + 1))[: int(mb * 1024 * 1024)]
    return {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": text}]}


def probe(client: httpx.Client, url: str) -> float:
    t0 = time.perf_counter()
    client.get(url).raise_for_status()
    return time.perf_counter() - t0


def measure(base: str, path: str, body: dict) -> dict:
    """/health latencies while `body` is posted to `path` (and the big request's own figures)."""
    out: dict = {}

    def send() -> None:
        t0 = time.perf_counter()
        r = httpx.post(base + path, json=body, timeout=600)
        out.update(status=r.status_code, big_s=time.perf_counter() - t0)

    with httpx.Client(timeout=600) as client:
        for _ in range(5):  # warm the connection
            probe(client, base + "/health")
        worker = threading.Thread(target=send)
        worker.start()
        lat = []
        while worker.is_alive():
            lat.append(probe(client, base + "/health"))
        worker.join()
    out.update(probes=len(lat), p50_ms=1000 * statistics.median(lat), max_ms=1000 * max(lat))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=4.0)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    renderer = Renderer.from_pretrained(smollm2_tokenizer_dir())
    body = big_body(args.mb)
    with tempfile.TemporaryDirectory() as tmp, RunStore(Path(tmp) / "run") as store:
        engine = FixedLatencyEngine(0.0, max_model_len=1 << 22)
        with ProxyServer(engine, store, renderer, max_body_bytes=16 * 1024 * 1024) as server:
            key = server.register_rollout("big")
            base = f"http://127.0.0.1:{server.port}"
            with httpx.Client() as c:
                idle = [probe(c, base + "/health") for _ in range(200)]
            print(f"machine: {platform.node()} {platform.processor() or platform.machine()}, "
                  f"python {platform.python_version()}")
            print(f"idle /health: p50 {1000 * statistics.median(idle):.2f} ms, max {1000 * max(idle):.2f} ms")
            print(f"{'request':<34} {'status':>6} {'big s':>7} {'probes':>7} {'p50 ms':>8} {'max ms':>9}")
            for route in ("/v1/messages/count_tokens", "/v1/messages"):
                for i in range(args.repeat):
                    # a fresh rollout each time: no history reuse between repeats
                    key = server.register_rollout(f"big-{route}-{i}")
                    m = measure(base, f"/r/{key}{route}", body)
                    print(f"{args.mb:g} MB {route:<29} {m['status']:>6} {m['big_s']:>7.2f} {m['probes']:>7} "
                          f"{m['p50_ms']:>8.2f} {m['max_ms']:>9.1f}")


if __name__ == "__main__":
    main()
