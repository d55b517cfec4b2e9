"""`harnessrl calls`: table, JSON, rollout filter, export; clear errors."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from harnessrl.app.main import app
from harnessrl.store import PROMPT, CallRecord, RunStore


def fill(run_dir) -> None:
    store = RunStore(run_dir)
    for rid in ("r1", "r2"):
        for seq in range(2):
            store.insert_call(CallRecord(
                call_id=f"{rid}-{seq}", rollout_id=rid, seq=seq, protocol="openai.chat", prompt_ids=[1, 2, 3],
                sampled_ids=[4, 5], logprobs=[-0.5, -0.5], prompt_provenance=[PROMPT, PROMPT, 0], policy_version=0,
                temperature=1.0, top_p=1.0, finish_reason="stop", request={"messages": []}, response={"ok": 1}))
    store.close()


def test_calls_table_json_and_export(tmp_path):
    fill(tmp_path)
    runner = CliRunner()
    r = runner.invoke(app, ["calls", str(tmp_path)], env={"COLUMNS": "200"})
    assert r.exit_code == 0 and "4 calls" in r.output and "openai.chat" in r.output
    r = runner.invoke(app, ["calls", str(tmp_path), "--json", "--rollout", "r2"])
    assert r.exit_code == 0
    rows = json.loads(r.stdout)
    assert [(c["rollout_id"], c["seq"]) for c in rows] == [("r2", 0), ("r2", 1)] and rows[0]["request"] == {"messages": []}
    r = runner.invoke(app, ["calls", str(tmp_path), "--export", str(tmp_path / "out.jsonl")])
    assert r.exit_code == 0 and len((tmp_path / "out.jsonl").read_text().splitlines()) == 4


def test_calls_errors(tmp_path):
    runner = CliRunner()
    r = runner.invoke(app, ["calls", str(tmp_path / "missing")])
    assert r.exit_code == 2 and "no run store" in r.output
    fill(tmp_path)
    r = runner.invoke(app, ["calls", str(tmp_path), "--export", str(tmp_path / "out.csv")])
    assert r.exit_code == 2 and ".parquet or .jsonl" in r.output


def test_serve_rejects_bad_options():
    r = CliRunner().invoke(app, ["serve", "--engine", "tpu"])
    assert r.exit_code != 0 and "--engine" in r.output
    r = CliRunner().invoke(app, ["serve", "--engine", "scripted", "--tool-format", "zsh"])
    assert r.exit_code != 0 and "--tool-format" in r.output and "bash" in r.output


def start_serve(run_dir, *extra: str):
    """`harnessrl serve --engine scripted` in a subprocess; (process, {"openai", "anthropic"} URLs)."""
    import os
    import re
    import subprocess
    import sys
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "harnessrl.app", "serve", "--engine", "scripted", "--port", "0", "--run-dir",
         str(run_dir), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env={**os.environ, "COLUMNS": "200"})
    urls, deadline = {}, time.monotonic() + 120
    while len(urls) < 2 and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        for name, pattern in (("openai", r"(http://127\.0\.0\.1:\d+/v1)\b"), ("anthropic", r"(http://127\.0\.0\.1:\d+)\s")):
            m = re.search(pattern, line)
            if m and name not in urls and ("Anthropic" in line) == (name == "anthropic"):
                urls[name] = m.group(1)
    if set(urls) != {"openai", "anthropic"}:
        proc.kill()
        raise AssertionError(f"serve did not print its URLs: {urls}")
    return proc, urls


def test_serve_prints_urls_serves_and_stops_on_ctrl_c(tmp_path):
    import signal

    import httpx

    run_dir = tmp_path / "run"
    proc, urls = start_serve(run_dir, "--tool-format", "bash")
    try:
        r = httpx.post(urls["openai"] + "/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]},
                       timeout=60)
        assert r.json()["choices"][0]["message"]["content"] == "Hello from the scripted engine."
        r = httpx.post(urls["anthropic"] + "/v1/messages", timeout=60,
                       json={"max_tokens": 20, "messages": [{"role": "user", "content": "hi"}]})
        assert r.json()["content"][0]["text"] == "Hello from the scripted engine."
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(60)
    assert proc.returncode == 0
    out = CliRunner().invoke(app, ["calls", str(run_dir), "--json"])
    assert [(c["seq"], c["protocol"]) for c in json.loads(out.stdout)] == [(0, "openai.chat"), (1, "anthropic.messages")]
    from harnessrl.store import RunStore

    with RunStore(run_dir) as store:  # the run records how it rendered (train = serve)
        assert store.get_meta("render") == {"tool_format": "bash", "history": "exact"}


def test_serve_drains_streams_on_sigterm(tmp_path):
    """SIGTERM mid-load: every stream already running completes (all events), new connections are
    refused, the process exits 0 and the store holds exactly the completed calls."""
    import asyncio
    import signal

    import httpx

    run_dir = tmp_path / "run"
    proc, urls = start_serve(run_dir, "--scripted-latency-s", "2", "--drain-s", "60")
    body = {"max_tokens": 20, "stream": True, "messages": [{"role": "user", "content": "hi"}]}

    async def main() -> tuple[list[str], str]:
        async with httpx.AsyncClient(timeout=60) as client:
            tasks = [asyncio.create_task(client.post(urls["anthropic"] + "/v1/messages", json=body)) for _ in range(8)]
            for _ in range(200):  # wait until the server has all 8 calls in flight
                if (await client.get(urls["anthropic"] + "/health")).json()["inflight"] == 8:
                    break
                await asyncio.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            texts = [r.text for r in await asyncio.gather(*tasks)]
        late = ""
        for _ in range(100):  # after the listener closes, a new client cannot get in
            try:
                async with httpx.AsyncClient(timeout=5) as c2:
                    await c2.get(urls["anthropic"] + "/health")
                await asyncio.sleep(0.05)
            except httpx.HTTPError as e:
                late = type(e).__name__
                break
        return texts, late

    try:
        texts, late = asyncio.run(main())
        assert proc.wait(120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert len(texts) == 8 and all(t.rstrip().endswith('data: {"type":"message_stop"}') for t in texts)
    assert late == "ConnectError"
    out = CliRunner().invoke(app, ["calls", str(run_dir), "--json"])
    assert [c["status"] for c in json.loads(out.stdout)] == ["ok"] * 8
