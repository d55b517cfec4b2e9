"""Proxy overhead with a fixed-latency engine (no model): the cost the proxy adds to each call.

1. Added latency: N Anthropic conversations of 20 turns, each turn resending the full history
   (~2.5 KB of tool output per turn, so turn 20 is a ~50 KB request). For turn-20 requests:
   proxy round trip (client -> HTTP -> parse -> render with exact history -> engine -> store
   commit -> response) minus the engine call alone on the same prompt ids.
2. Throughput: calls/s at 1, 64 and 256 concurrent streaming Anthropic conversations.

The server (ProxyServer + FixedLatencyEngine + real SmolLM2 renderer + real RunStore) runs in a
child process; the client is a minimal keep-alive HTTP/1.1 client on asyncio streams, so that
client-side cost stays small. Run: `.venv/bin/python benchmarks/proxy_overhead.py [--quick]`.

Anchor (`--litellm PATH/TO/litellm`): LiteLLM's proxy measured in the same run, by the same client,
on the same conversations, in front of a fake OpenAI-compatible upstream (its own child process)
that answers every call after the same fixed latency as our engine, with the same 16-token reply.
LiteLLM's added latency = its round trip minus a direct call to that upstream with the same
conversation in OpenAI form. LiteLLM goes in its own venv so it cannot change ours:
`python3 -m venv .litellm-venv && .litellm-venv/bin/pip install 'litellm[proxy]'`.
"""

from __future__ import annotations

from harnessrl.render.conversation import Conversation

import argparse
import asyncio
import multiprocessing as mp
import os
import subprocess
import sys
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

    def __init__(self, port: int, auth: str = ""):
        self.port = port
        self.extra = f"Authorization: Bearer {auth}\r\n" if auth else ""
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        head = (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n{self.extra}\r\n").encode()
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
        body = orjson.loads(data)
        if "content" not in body:
            raise RuntimeError(f"no content in the reply: {data[:300]!r}")
        return body["content"]
    text = []
    for line in data.split(b"\n"):
        line = line.strip()
        if line.startswith(b"data: ") and b"text_delta" in line:
            text.append(orjson.loads(line[6:])["delta"]["text"])
    return [{"type": "text", "text": "".join(text)}]


def messages_path(key: str) -> str:
    """Our proxy routes by rollout key in the path; LiteLLM (key "") serves /v1/messages."""
    return f"/r/{key}/v1/messages" if key else "/v1/messages"


async def conversation(port: int, key: str, turns: int, stream: bool, timings: list[list[float]] | None,
                       tool_output: str = TOOL_OUTPUT, system: str = SYSTEM, auth: str = "") -> int:
    http = Http(port, auth)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Inspect the workspace."}]
    try:
        for turn in range(turns):
            body = orjson.dumps({"model": "claude-x", "max_tokens": 64, "stream": stream, "system": system,
                                 "tools": TOOLS, "messages": messages})
            t = time.perf_counter()
            status, data = await http.post(messages_path(key), body)
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


class Ours:
    """Our proxy in its child process (ProxyServer + FixedLatencyEngine + renderer + store)."""

    name = "harnessrl"
    auth = ""

    def __init__(self, conn: Any, port: int):
        self.conn, self.port = conn, port

    def keys(self, n: int) -> list[str]:
        self.conn.send(("register", n))
        return self.conn.recv()

    def cpu(self) -> float:
        self.conn.send(("cpu",))
        return self.conn.recv()

    def direct(self, n_last: int, shape: Shape) -> list[float]:
        self.conn.send(("direct", n_last))
        return self.conn.recv()


class LiteLLM:
    """LiteLLM's proxy (a subprocess from its own venv) in front of the fake OpenAI upstream."""

    name = "LiteLLM"

    def __init__(self, exe: str, upstream_port: int, workdir: str):
        import psutil

        self.upstream_port = upstream_port
        self.port = free_port()
        self.auth = "sk-bench-" + os.urandom(16).hex()  # a throwaway key: LiteLLM refuses to start without one
        cfg = os.path.join(workdir, "litellm.yaml")
        with open(cfg, "w") as f:
            f.write("model_list:\n  - model_name: claude-x\n    litellm_params:\n      model: hosted_vllm/fake\n"
                    f"      api_base: http://127.0.0.1:{upstream_port}/v1\n      api_key: fake\n"
                    "litellm_settings:\n  telemetry: false\n  set_verbose: false\n"
                    f"general_settings:\n  master_key: {self.auth}\n")
        env = {**os.environ, "LITELLM_LOG": "ERROR", "LITELLM_TELEMETRY": "False", "NO_PROXY": "127.0.0.1",
               "DISABLE_ADMIN_UI": "True"}
        self.log = open(os.path.join(workdir, "litellm.log"), "wb")
        self.proc = subprocess.Popen([exe, "--config", cfg, "--host", "127.0.0.1", "--port", str(self.port),
                                      "--num_workers", "1"], env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.ps = psutil.Process(self.proc.pid)
        wait_http(self.port, "/health/liveliness", self.proc, 180)

    def keys(self, n: int) -> list[str]:
        return [""] * n

    def cpu(self) -> float:
        total = 0.0
        for p in [self.ps] + self.ps.children(recursive=True):
            try:
                t = p.cpu_times()
                total += t.user + t.system
            except Exception:  # noqa: BLE001 - a child that just exited
                pass
        return total

    def direct(self, n_last: int, shape: Shape) -> list[float]:
        """The upstream alone: the turn-20 conversation posted to it in OpenAI form, n_last times."""
        msgs: list[dict[str, Any]] = [{"role": "system", "content": shape.system},
                                      {"role": "user", "content": "Inspect the workspace."}]
        for turn in range(19):
            msgs.append({"role": "assistant", "content": " ok done" * 8})
            msgs.append({"role": "user", "content": f"turn {turn}\n{shape.tool_output}"})
        tools = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                   "parameters": t["input_schema"]}} for t in TOOLS]
        body = orjson.dumps({"model": "fake", "max_tokens": 64, "messages": msgs, "tools": tools})

        async def run() -> list[float]:
            http, out = Http(self.upstream_port), []
            for _ in range(n_last):
                t = time.perf_counter()
                status, _ = await http.post("/v1/chat/completions", body)
                out.append(time.perf_counter() - t)
                assert status == 200
            http.close()
            return out

        return asyncio.run(run())

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(port: int, path: str, proc: Any, timeout: float) -> None:
    import urllib.request

    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before it listened")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise RuntimeError(f"no answer on port {port} after {timeout:.0f} s")


# -- fake OpenAI upstream (child process) ------------------------------------------------------


def fake_upstream(conn: Any, latency_s: float, n_tokens: int) -> None:
    """OpenAI chat completions after a fixed latency: a reply of n_tokens words, JSON or SSE."""
    text = " ok done" * (n_tokens // 2)

    def reply(stream: bool) -> bytes:
        usage = {"prompt_tokens": 1000, "completion_tokens": n_tokens, "total_tokens": 1000 + n_tokens}
        if not stream:
            body = orjson.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "fake",
                                 "choices": [{"index": 0, "finish_reason": "stop",
                                              "message": {"role": "assistant", "content": text}}], "usage": usage})
            return (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n" % len(body)) + body
        events = []
        for i, piece in enumerate([" ok", " done"] * (n_tokens // 2)):
            delta = {"role": "assistant", "content": piece} if i == 0 else {"content": piece}
            events.append({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "fake",
                           "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        events.append({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 0, "model": "fake",
                       "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": usage})
        data = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events) + b"data: [DONE]\n\n"
        return (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Content-Length: %d\r\n\r\n" % len(data)) + data

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request_line = await reader.readline()
                if not request_line:
                    break
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    k, _, v = line.decode().partition(":")
                    if k.strip().lower() == "content-length":
                        length = int(v)
                body = await reader.readexactly(length) if length else b""
                if request_line.startswith(b"GET"):
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
                    continue
                stream = bool(orjson.loads(body).get("stream")) if body else False
                await asyncio.sleep(latency_s)
                writer.write(reply(stream))
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0, backlog=1024)
        conn.send(server.sockets[0].getsockname()[1])
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)  # "stop"
        server.close()

    asyncio.run(main())


# -- measurements --------------------------------------------------------------------------------


def bench_latency(target: Any, n_conv: int, shape: Shape) -> dict[str, float]:
    keys = target.keys(n_conv)
    cpu0 = target.cpu()
    timings: list[list[float]] = [[] for _ in range(20)]

    async def run() -> None:
        for key in keys:  # one conversation at a time: latency, not throughput
            await conversation(target.port, key, 20, False, timings, shape.tool_output, shape.system, target.auth)

    asyncio.run(run())
    cpu_per_call = (target.cpu() - cpu0) / (20 * n_conv)
    direct = target.direct(n_conv, shape)
    proxy = timings[19]
    added = [p - d for p, d in zip(proxy, direct)]
    return {"n": len(added), "request_kb": last_body_size(20, shape) / 1000, "proxy_p50_ms": pct(proxy, 0.5) * 1e3,
            "engine_p50_ms": pct(direct, 0.5) * 1e3, "added_p50_ms": pct(added, 0.5) * 1e3,
            "added_p99_ms": pct(added, 0.99) * 1e3, "server_cpu_ms_per_call": cpu_per_call * 1e3}


def bench_throughput(target: Any, concurrency: int, turns: int, tool_output: str) -> dict[str, float]:
    keys = target.keys(concurrency)
    cpu0 = target.cpu()

    async def run() -> float:
        t = time.perf_counter()
        done = await asyncio.gather(*(conversation(target.port, k, turns, True, None, tool_output, SYSTEM, target.auth)
                                     for k in keys))
        return sum(done) / (time.perf_counter() - t)

    rate = asyncio.run(run())
    cpu = (target.cpu() - cpu0) / (concurrency * turns)
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
            conv = Conversation(r, mode="exact")
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
    ap.add_argument("--latency-ms", type=float, default=20.0, help="fixed engine (and fake upstream) latency per call")
    ap.add_argument("--tokens", type=int, default=16, help="sampled tokens per call")
    ap.add_argument("--conversations", type=int, default=30, help="20-turn conversations for the latency figure")
    ap.add_argument("--turns", type=int, default=8, help="turns per conversation in the throughput runs")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 64, 256])
    ap.add_argument("--tool-kb", type=float, nargs="+", default=[2.5, 0.1],
                    help="new tool output per turn in the throughput runs (KB); tokenising it is most of the cost")
    ap.add_argument("--sync", default="normal", choices=["full", "normal"], help="SQLite synchronous mode of the store")
    ap.add_argument("--no-breakdown", action="store_true", help="skip the in-process per-stage CPU breakdown")
    ap.add_argument("--shapes", nargs="+", choices=sorted(SHAPES), default=["claude-code", "tool-heavy"],
                    help="how the 50 KB of the latency conversations is made up")
    ap.add_argument("--litellm", default=None, metavar="EXE",
                    help="also measure LiteLLM's proxy (path of its `litellm` command, e.g. .litellm-venv/bin/litellm)")
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
    targets: list[Any] = [Ours(parent, parent.recv())]
    up_parent = up_proc = None
    workdir = tempfile.mkdtemp(prefix="proxy-bench-")
    if args.litellm:
        up_parent, up_child = ctx.Pipe()
        up_proc = ctx.Process(target=fake_upstream, args=(up_child, args.latency_ms / 1000, args.tokens), daemon=True)
        up_proc.start()
        targets.append(LiteLLM(args.litellm, up_parent.recv(), workdir))
    print(f"engine / upstream latency {args.latency_ms:g} ms, {args.tokens} tokens a reply; "
          f"load average before: {os.getloadavg()[0]:.1f} (2 cores shared with other jobs: wall figures are noisy; "
          "server CPU ms/call is the steadier figure)")
    try:
        for target in targets:
            for shape in shapes:
                lat = bench_latency(target, args.conversations, shape)
                print(f"{target.name} latency ({shape.name}): {lat['n']} turn-20 requests of {lat['request_kb']:.1f} KB; "
                      f"proxy p50 {lat['proxy_p50_ms']:.2f} ms, engine alone p50 {lat['engine_p50_ms']:.2f} ms; "
                      f"added p50 {lat['added_p50_ms']:.2f} ms, p99 {lat['added_p99_ms']:.2f} ms; "
                      f"server CPU {lat['server_cpu_ms_per_call']:.2f} ms/call (all 20 turns)", flush=True)
            for kb, c in [(kb, c) for kb in args.tool_kb for c in args.concurrency]:
                r = bench_throughput(target, c, args.turns, LISTING * max(1, round(kb * 1000 / len(LISTING))))
                print(f"{target.name} throughput ({kb:g} KB new tool output/turn): {r['concurrency']:>4} concurrent "
                      f"streaming conversations, {r['calls']} calls: "
                      f"{r['calls_per_s']:.0f} calls/s; server CPU {r['server_cpu_ms_per_call']:.2f} ms/call "
                      f"(= {r['cpu_bound_calls_per_s']:.0f} calls per server-CPU-second)", flush=True)
        parent.send(("count",))
        print(f"calls stored by harnessrl: {parent.recv()}; load average after: {os.getloadavg()[0]:.1f}")
    finally:
        for target in targets[1:]:
            target.close()
        if up_parent is not None:
            up_parent.send("stop")
            up_proc.join(10)
        parent.send("stop")
        proc.join(30)


if __name__ == "__main__":
    main()
