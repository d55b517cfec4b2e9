"""Proxy overhead with a fixed-latency engine (no model): the cost the proxy adds to each call.

1. Added latency: N Anthropic conversations of 20 turns, each turn resending the full history
   (~2.5 KB of tool output per turn, so turn 20 is a ~50 KB request). For turn-20 requests:
   proxy round trip (client -> HTTP -> parse -> render with exact history -> engine -> store
   commit -> response) minus the engine call alone on the same prompt ids.
2. Throughput: calls/s at 1, 64 and 256 concurrent streaming Anthropic conversations.

The server (ProxyServer + FixedLatencyEngine + real SmolLM2 renderer + real RunStore) runs in a
child process; the client is a minimal keep-alive HTTP/1.1 client on asyncio streams, so that
client-side cost stays small. Run: `.venv/bin/python benchmarks/proxy_overhead.py [--quick]`.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Any

import orjson

SYSTEM = "You are a coding agent. Follow the instructions carefully. " * 40  # ~2.4 KB
LISTING = "drwxr-xr-x 2 root root 4096 Nov 30 12:00 src\n-rw-r--r-- 1 root root 1234 main.py\n"  # 84 bytes
TOOL_OUTPUT = LISTING * 30  # ~2.5 KB of new tool output per turn
RULES = "".join(f"Rule {i}: when a task mentions file number {i}, inspect it before editing and keep changes minimal.\n"
                for i in range(450))  # ~44 KB, a Claude-Code-sized system prompt


@dataclass(frozen=True)
class Shape:
    """How a 20-turn conversation reaches ~50 KB: a big system prompt or big tool outputs."""

    name: str
    system: str
    tool_output: str


SHAPES = {
    "tool-heavy": Shape("tool-heavy", SYSTEM, TOOL_OUTPUT),  # 2.4 KB system, 2.5 KB new text per turn
    "claude-code": Shape("claude-code", RULES, LISTING * 3),  # 44 KB system, 0.25 KB new text per turn
}
TOOLS = [{"name": "Bash", "description": "Run a shell command in the workspace.",
          "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}]


# -- server (child process) ------------------------------------------------------------------------


def serve(conn: Any, latency_s: float, n_tokens: int, synchronous: str) -> None:
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.engine.scripted import FixedLatencyEngine
    from harnessrl.proxy.server import ProxyServer
    from harnessrl.render.renderer import Renderer
    from harnessrl.store import RunStore

    renderer = Renderer.from_pretrained(smollm2_tokenizer_dir())
    word_ids = renderer.encode(" ok done")
    # n_tokens ids ending with the end-of-turn token, like a real model's reply
    engine = FixedLatencyEngine(latency_s, n_tokens, token_ids=(word_ids * n_tokens)[: n_tokens - 1] + [renderer.eot_id])
    with tempfile.TemporaryDirectory() as run_dir:
        store = RunStore(run_dir, synchronous=synchronous)
        server = ProxyServer(engine, store, renderer).start()
        conn.send(server.port)
        while True:
            msg = conn.recv()
            if msg == "stop":
                break
            if msg[0] == "direct":  # time the engine alone on the prompt ids of a stored call
                conn.send(direct_engine_time(engine, store, msg[1]))
            elif msg[0] == "register":
                conn.send([server.register_rollout(f"bench-{i}-{time.monotonic_ns()}") for i in range(msg[1])])
            elif msg[0] == "count":
                conn.send(store.count_calls())
            elif msg[0] == "cpu":  # CPU seconds of the whole server process (all threads)
                conn.send(time.process_time())
        server.stop()
        store.close()


def direct_engine_time(engine: Any, store: Any, n_last: int) -> list[float]:
    from harnessrl.engine.base import SamplingParams

    calls = [c for c in store.list_calls() if c.seq == 19][-n_last:]

    async def run() -> list[float]:
        out = []
        for c in calls:
            t = time.perf_counter()
            await engine.generate(c.prompt_ids, SamplingParams(max_tokens=c.meta["sampling"]["max_tokens"]))
            out.append(time.perf_counter() - t)
        return out

    return asyncio.run(run())


# -- client ------------------------------------------------------------------------------------


class Http:
    """Keep-alive HTTP/1.1 POST of JSON bodies over one connection (Content-Length or chunked replies)."""

    def __init__(self, port: int):
        self.port = port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n").encode()
        self.writer.write(head + body)
        status_line = await self.reader.readline()
        headers = {}
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            k, _, v = line.decode().partition(":")
            headers[k.strip().lower()] = v.strip()
        if "content-length" in headers:
            data = await self.reader.readexactly(int(headers["content-length"]))
        else:
            parts = []
            while (size := int((await self.reader.readline()).strip(), 16)) > 0:
                parts.append(await self.reader.readexactly(size))
                await self.reader.readline()
            await self.reader.readline()
            data = b"".join(parts)
        return int(status_line.split()[1]), data

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def reply_blocks(data: bytes, stream: bool) -> list[dict[str, Any]]:
    if not stream:
        return orjson.loads(data)["content"]
    text = []
    for line in data.split(b"\n"):
        if line.startswith(b"data: ") and b"text_delta" in line:
            text.append(orjson.loads(line[6:])["delta"]["text"])
    return [{"type": "text", "text": "".join(text)}]


async def conversation(port: int, key: str, turns: int, stream: bool, timings: list[list[float]] | None,
                       tool_output: str = TOOL_OUTPUT, system: str = SYSTEM) -> int:
    http = Http(port)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Inspect the workspace."}]
    try:
        for turn in range(turns):
            body = orjson.dumps({"model": "claude-x", "max_tokens": 64, "stream": stream, "system": system,
                                 "tools": TOOLS, "messages": messages})
            t = time.perf_counter()
            status, data = await http.post(f"/r/{key}/v1/messages", body)
            elapsed = time.perf_counter() - t
            if status != 200:
                raise RuntimeError(f"status {status}: {data[:200]!r}")
            if timings is not None:
                timings[turn].append(elapsed)
            messages.append({"role": "assistant", "content": reply_blocks(data, stream)})
            messages.append({"role": "user", "content": [{"type": "text", "text": f"turn {turn}\n{tool_output}"}]})
    finally:
        http.close()
    return turns


def last_body_size(turns: int, shape: Shape) -> int:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Inspect the workspace."}]
    for turn in range(turns - 1):
        messages.append({"role": "assistant", "content": [{"type": "text", "text": " ok done" * 8}]})
        messages.append({"role": "user", "content": [{"type": "text", "text": f"turn {turn}\n{shape.tool_output}"}]})
    return len(orjson.dumps({"model": "claude-x", "max_tokens": 64, "system": shape.system, "tools": TOOLS,
                             "messages": messages}))


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


def server_cpu(conn: Any) -> float:
    conn.send(("cpu",))
    return conn.recv()


def bench_latency(conn: Any, port: int, n_conv: int, shape: Shape) -> dict[str, float]:
    conn.send(("register", n_conv))
    keys = conn.recv()
    cpu0 = server_cpu(conn)
    timings: list[list[float]] = [[] for _ in range(20)]

    async def run() -> None:
        for key in keys:  # one conversation at a time: latency, not throughput
            await conversation(port, key, 20, False, timings, shape.tool_output, shape.system)

    asyncio.run(run())
    cpu_per_call = (server_cpu(conn) - cpu0) / (20 * n_conv)
    conn.send(("direct", n_conv))
    direct = conn.recv()
    proxy = timings[19]
    added = [p - d for p, d in zip(proxy, direct)]
    return {"n": len(added), "request_kb": last_body_size(20, shape) / 1000, "proxy_p50_ms": pct(proxy, 0.5) * 1e3,
            "engine_p50_ms": pct(direct, 0.5) * 1e3, "added_p50_ms": pct(added, 0.5) * 1e3,
            "added_p99_ms": pct(added, 0.99) * 1e3, "server_cpu_ms_per_call": cpu_per_call * 1e3}


def bench_throughput(conn: Any, port: int, concurrency: int, turns: int, tool_output: str) -> dict[str, float]:
    conn.send(("register", concurrency))
    keys = conn.recv()
    cpu0 = server_cpu(conn)

    async def run() -> float:
        t = time.perf_counter()
        done = await asyncio.gather(*(conversation(port, k, turns, True, None, tool_output) for k in keys))
        return sum(done) / (time.perf_counter() - t)

    rate = asyncio.run(run())
    cpu = (server_cpu(conn) - cpu0) / (concurrency * turns)
    return {"concurrency": concurrency, "calls": concurrency * turns, "calls_per_s": rate,
            "server_cpu_ms_per_call": cpu * 1e3, "cpu_bound_calls_per_s": 1.0 / cpu if cpu > 0 else float("inf")}


def stage_breakdown(shape: Shape, n_conv: int = 5) -> dict[str, float]:
    """CPU ms per call of each stage (turns 10-19 of 20-turn Anthropic conversations), in-process, no HTTP."""
    import tempfile as tf

    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.proxy import anthropic
    from harnessrl.proxy.protocols import ANTHROPIC
    from harnessrl.proxy.canonical import CallResult
    from harnessrl.render.renderer import Renderer
    from harnessrl.store import CallRecord, RunStore

    r = Renderer.from_pretrained(smollm2_tokenizer_dir())
    reply = (r.encode(" ok done") * 16)[:15] + [r.eot_id]
    cpu: dict[str, float] = {}

    counted = [False]  # only turns 10-19: the steady state (turn 0 tokenises the whole system prompt)

    def clock(name: str, fn: Any) -> Any:
        t = time.process_time()
        out = fn()
        if counted[0]:
            cpu[name] = cpu.get(name, 0.0) + time.process_time() - t
        return out

    with tf.TemporaryDirectory() as run_dir:
        store = RunStore(run_dir)
        for i in range(n_conv):
            conv = r.conversation("exact")
            messages: list[dict[str, Any]] = [{"role": "user", "content": "Inspect the workspace."}]
            for turn in range(20):
                counted[0] = turn >= 10
                body = orjson.dumps({"model": "x", "max_tokens": 64, "stream": True, "system": shape.system,
                                     "tools": TOOLS, "messages": messages})
                raw = clock("json parse", lambda: orjson.loads(body))
                req = clock("protocol parse (pydantic + to Message)", lambda: ANTHROPIC.parse(raw))
                rp = clock("render: prepare (exact history, tokenise new text)", lambda: conv.prepare(req.messages, req.tools))
                parsed = clock("render: commit (parse the reply)", lambda: conv.commit(rp, reply, 0, "stop"))
                res = CallResult(f"c{i}-{turn}", "x", 0, parsed, len(rp.ids), len(reply), "stop")
                resp = clock("response body + SSE events", lambda: (anthropic.response_body(res),
                                                                    anthropic.stream_events(res))[0])
                rec = CallRecord(f"c{i}-{turn}", f"r{i}", turn, "anthropic.messages", list(rp.ids), reply,
                                 [-0.1] * len(reply), list(rp.provenance), 0, 1.0, 1.0, "stop", request=raw,
                                 response=resp)
                clock("store: insert + commit", lambda: store.insert_call(rec))
                messages.append({"role": "assistant", "content": [{"type": "text", "text": parsed.content}]})
                messages.append({"role": "user", "content": [{"type": "text", "text": f"turn {turn}\n{shape.tool_output}"}]})
        store.close()
    return {k: v / (10 * n_conv) * 1e3 for k, v in cpu.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latency-ms", type=float, default=0.0, help="fixed engine latency per call")
    ap.add_argument("--tokens", type=int, default=16, help="sampled tokens per call")
    ap.add_argument("--conversations", type=int, default=30, help="20-turn conversations for the latency figure")
    ap.add_argument("--turns", type=int, default=8, help="turns per conversation in the throughput runs")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 64, 256])
    ap.add_argument("--tool-kb", type=float, nargs="+", default=[2.5, 0.1],
                    help="new tool output per turn in the throughput runs (KB); tokenising it is most of the cost")
    ap.add_argument("--sync", default="full", choices=["full", "normal"], help="SQLite synchronous mode of the store")
    ap.add_argument("--no-breakdown", action="store_true", help="skip the in-process per-stage CPU breakdown")
    ap.add_argument("--shapes", nargs="+", choices=sorted(SHAPES), default=["claude-code", "tool-heavy"],
                    help="how the 50 KB of the latency conversations is made up")
    ap.add_argument("--quick", action="store_true", help="small run (smoke test)")
    args = ap.parse_args()
    if args.quick:
        args.conversations, args.turns, args.concurrency, args.tool_kb = 3, 3, [1, 8], [2.5]
    shapes = [SHAPES[name] for name in args.shapes]
    for shape in shapes if not args.no_breakdown else []:
        stages = stage_breakdown(shape, 2 if args.quick else 5)
        print(f"CPU per call by stage ({shape.name}: turns 10-19 of 20-turn conversations, in-process, no HTTP):")
        for name, ms in stages.items():
            print(f"  {name:55s} {ms:6.2f} ms")
        print(f"  {'total':55s} {sum(stages.values()):6.2f} ms")
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=serve, args=(child, args.latency_ms / 1000, args.tokens, args.sync), daemon=True)
    proc.start()
    port = parent.recv()
    print(f"load average before: {os.getloadavg()[0]:.1f} (2 cores shared with other jobs: wall figures are noisy; "
          "server CPU ms/call is the steadier figure)")
    try:
        for shape in shapes:
            lat = bench_latency(parent, port, args.conversations, shape)
            print(f"latency ({shape.name}): {lat['n']} turn-20 requests of {lat['request_kb']:.1f} KB; "
                  f"proxy p50 {lat['proxy_p50_ms']:.2f} ms, engine alone p50 {lat['engine_p50_ms']:.2f} ms; "
                  f"added p50 {lat['added_p50_ms']:.2f} ms, p99 {lat['added_p99_ms']:.2f} ms; "
                  f"server CPU {lat['server_cpu_ms_per_call']:.2f} ms/call (all 20 turns)")
        for kb, c in [(kb, c) for kb in args.tool_kb for c in args.concurrency]:
            r = bench_throughput(parent, port, c, args.turns, LISTING * max(1, round(kb * 1000 / len(LISTING))))
            print(f"throughput ({kb:g} KB new tool output/turn): {r['concurrency']:>4} concurrent streaming "
                  f"conversations, {r['calls']} calls: "
                  f"{r['calls_per_s']:.0f} calls/s; server CPU {r['server_cpu_ms_per_call']:.2f} ms/call "
                  f"(= {r['cpu_bound_calls_per_s']:.0f} calls per server-CPU-second)")
        parent.send(("count",))
        print(f"calls stored: {parent.recv()}; load average after: {os.getloadavg()[0]:.1f}")
    finally:
        parent.send("stop")
        proc.join(30)


if __name__ == "__main__":
    main()
