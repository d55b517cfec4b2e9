"""`harnessrl calls`: table, JSON, rollout filter, export; clear errors."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from harnessrl.cli import app
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
