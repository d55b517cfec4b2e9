"""Load generation against a running proxy (benchmarks/proxy_sessions.py, proxy_kill9.py and the
kill -9 test): `harnessrl serve` in a subprocess, N rollout keys each holding a streamed Anthropic
conversation, and what every call looked like from the client's side.

    proc, url, token = start_serve(run_dir, "--scripted-latency-s", "0.2")
    outcomes = asyncio.run(run_sessions(url, token, n_sessions=64, turns=3))
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from harnessrl.proxy.jsonutil import loads


@dataclass
class Outcome:
    """One call as the client saw it."""

    rollout_id: str
    turn: int
    status: int  # HTTP status of the final attempt (0: no answer)
    latency_s: float  # first attempt's start -> last byte of the final attempt
    call_id: str | None = None  # from the message id (msg_<call id>)
    complete: bool = False  # the stream ended with message_stop
    retries: int = 0  # typed 429 / 529 answers retried after Retry-After
    error: str = ""


def start_serve(run_dir: str | Path, *extra: str, timeout_s: float = 600.0) -> tuple[subprocess.Popen, str, str]:
    """`harnessrl serve --engine scripted --port 0` on `run_dir`; (process, base URL, admin token)."""
    cmd = [sys.executable, "-m", "harnessrl.app", "serve", "--engine", "scripted", "--port", "0",
           "--run-dir", str(run_dir), *extra]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "COLUMNS": "250"})
    url = token = None
    deadline = time.monotonic() + timeout_s
    while (url is None or token is None) and time.monotonic() < deadline:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line:
            break
        m = re.search(r"(http://127\.0\.0\.1:\d+)/v1\b", line)
        url = url or (m.group(1) if m else None)
        m = re.search(r"admin token \(POST /admin/rollouts\): (\S+)", line)
        token = token or (m.group(1) if m else None)
    if url is None or token is None:
        proc.kill()
        raise RuntimeError("harnessrl serve did not print its URL and admin token")
    return proc, url, token


async def _stream_call(client: httpx.AsyncClient, url: str, body: dict[str, Any], out: Outcome) -> str:
    """One streamed Anthropic call; the reply text ("" when it failed)."""
    text: list[str] = []
    async with client.stream("POST", url, json=body) as r:
        out.status = r.status_code
        if r.status_code != 200:
            await r.aread()
            out.error = r.text[:200]
            return ""
        async for line in r.aiter_lines():
            if not line.startswith("data: "):
                continue
            event = loads(line[6:])
            kind = event.get("type")
            if kind == "message_start":
                out.call_id = event["message"]["id"].removeprefix("msg_")
            elif kind == "content_block_delta" and event["delta"].get("type") == "text_delta":
                text.append(event["delta"]["text"])
            elif kind == "message_stop":
                out.complete = True
            elif kind == "error":
                out.error = str(event)[:200]
    return "".join(text)


async def conversation(client: httpx.AsyncClient, base: str, rollout_id: str, turns: int,
                       outcomes: list[Outcome], max_retries: int = 20) -> None:
    """`turns` streamed calls, each resending the history + the previous reply (as harnesses do)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"Rollout {rollout_id}: inspect the workspace."}]
    for turn in range(turns):
        body = {"model": "policy", "max_tokens": 32, "stream": True, "messages": messages}
        out = Outcome(rollout_id, turn, 0, 0.0)
        outcomes.append(out)
        t0 = time.perf_counter()
        reply = ""
        while True:
            try:
                reply = await _stream_call(client, base + "/v1/messages", body, out)
            except httpx.HTTPError as e:
                out.status, out.error = 0, f"{type(e).__name__}: {e}"[:200]
            if out.status in (429, 529) and out.retries < max_retries:  # typed backpressure: back off, retry
                out.retries += 1
                await asyncio.sleep(1.0)
                continue
            break
        out.latency_s = time.perf_counter() - t0
        if not out.complete:
            return
        messages = messages + [{"role": "assistant", "content": reply},
                               {"role": "user", "content": f"Turn {turn}: continue."}]


async def run_sessions(url: str, admin_token: str, n_sessions: int, turns: int, prefix: str = "s",
                       timeout_s: float = 600.0, outcomes: list[Outcome] | None = None) -> list[Outcome]:
    """Register `n_sessions` keys, run one conversation on each concurrently, close the keys.
    Outcomes are appended to `outcomes` as calls start (watch it to act mid-load)."""
    auth = {"Authorization": f"Bearer {admin_token}"}
    limits = httpx.Limits(max_connections=n_sessions + 8, max_keepalive_connections=n_sessions + 8)
    outcomes = [] if outcomes is None else outcomes
    async with httpx.AsyncClient(timeout=timeout_s, limits=limits) as client:
        keys = {}
        for i in range(n_sessions):
            r = await client.post(url + "/admin/rollouts", json={"rollout_id": f"{prefix}{i}"}, headers=auth)
            r.raise_for_status()
            keys[f"{prefix}{i}"] = r.json()["key"]
        await asyncio.gather(*(conversation(client, f"{url}/r/{key}", rid, turns, outcomes)
                               for rid, key in keys.items()))
        for key in keys.values():
            try:
                await client.delete(f"{url}/admin/rollouts/{key}", headers=auth)
            except httpx.HTTPError:  # the server is gone (a kill test): its keys went with it
                break
    return outcomes


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
