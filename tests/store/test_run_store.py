"""RunStore: WAL mode, round trips, concurrency (threads and processes), export."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
import threading
from pathlib import Path

import pytest

from harnessrl.store import PROMPT, CallRecord, RolloutRecord, RunStore
from harnessrl.store.export import ExportError


def make_call(i: int, rollout: str = "r0", seq: int | None = None) -> CallRecord:
    return CallRecord(
        call_id=f"call-{rollout}-{i}",
        rollout_id=rollout,
        seq=i if seq is None else seq,
        protocol="anthropic.messages",
        prompt_ids=[1, 2, 3, 70000 + i],
        sampled_ids=[5, 6, i],
        logprobs=[-0.5, -1.25, -0.125],
        prompt_provenance=[PROMPT, PROMPT, 3, PROMPT],
        policy_version=3,
        temperature=0.7,
        top_p=0.9,
        finish_reason="stop",
        t_start=100.0 + i,
        t_end=101.0 + i,
        request={"messages": [{"role": "user", "content": f"hi {i}"}], "ü": "ß"},
        response={"content": [{"type": "text", "text": "ok"}]},
        meta={"rollout_key": "k", "endpoint": "/v1/messages", "sampling": {"max_tokens": 16}},
    )


def test_wal_mode_and_file(tmp_path):
    store = RunStore(tmp_path / "run")
    assert store.journal_mode() == "wal"
    assert (tmp_path / "run" / "harnessrl.sqlite").exists()
    from harnessrl.store.schema import SCHEMA_VERSION

    assert store.get_meta("schema_version") == SCHEMA_VERSION
    store.close()


def test_call_round_trip(tmp_path):
    store = RunStore(tmp_path)
    call = make_call(7)
    store.insert_call(call)
    (back,) = store.list_calls(include_raw=True)
    assert back == call
    (light,) = store.list_calls()
    assert light.request is None and light.response is None
    assert light.prompt_ids == call.prompt_ids and light.prompt_provenance == call.prompt_provenance
    # ids are stored as int32 blobs, 4 bytes a token
    conn = sqlite3.connect(store.path)
    blob, n = conn.execute("SELECT prompt_ids, n_prompt FROM calls").fetchone()
    assert len(blob) == 4 * len(call.prompt_ids) and n == 4
    assert conn.execute("SELECT rollout_key, endpoint FROM calls").fetchone() == ("k", "/v1/messages")
    store.close()


def test_error_call_round_trip(tmp_path):
    store = RunStore(tmp_path)
    err = CallRecord(
        call_id="e1", rollout_id="adhoc", seq=0, protocol="openai.chat", prompt_ids=[], sampled_ids=[],
        logprobs=[], prompt_provenance=[], policy_version=0, temperature=1.0, top_p=1.0,
        finish_reason="stop", status="error", meta={"error": "prompt too long"},
    )
    store.insert_call(err)
    (back,) = store.list_calls()
    assert back.status == "error" and back.meta["error"] == "prompt too long"
    row = sqlite3.connect(store.path).execute("SELECT error FROM calls").fetchone()
    assert row == ("prompt too long",)


def test_list_calls_filter_and_order(tmp_path):
    store = RunStore(tmp_path)
    store.insert_calls([make_call(2, "b"), make_call(0, "b"), make_call(1, "a"), make_call(1, "b")])
    assert [(c.rollout_id, c.seq) for c in store.list_calls()] == [("a", 1), ("b", 0), ("b", 1), ("b", 2)]
    assert [c.seq for c in store.list_calls(["b"])] == [0, 1, 2]
    assert store.list_calls([]) == []
    assert store.count_calls() == 4 and store.count_calls("a") == 1
    assert store.next_seq("b") == 3 and store.next_seq("zzz") == 0
    assert store.get_call("call-a-1").request is not None
    assert store.get_call("nope") is None


def test_rollouts_upsert_and_filters(tmp_path):
    store = RunStore(tmp_path)
    r = RolloutRecord("r1", "t1", "builtin", "g1", "ok", 1.0, checks={"file": 1.0}, step=2, durations={"total_s": 3.5})
    store.put_rollout(r)
    store.put_rollout(RolloutRecord("r2", "t1", "builtin", "g1", "timeout", None, step=2, sample_idx=1))
    store.put_rollout(RolloutRecord("r3", "t2", "codex", "g2", "ok", 0.0, step=3))
    assert store.list_rollouts(step=2) == [r, store.get_rollout("r2")]
    assert [x.rollout_id for x in store.list_rollouts(group_id="g2")] == ["r3"]
    updated = RolloutRecord("r1", "t1", "builtin", "g1", "ok", 0.5, step=2, call_count=4)
    store.put_rollout(updated)
    assert store.get_rollout("r1") == updated
    assert len(store.list_rollouts()) == 3


def test_steps_and_meta(tmp_path):
    store = RunStore(tmp_path)
    store.put_step(1, {"loss": 0.5})
    store.put_step(0, {"loss": 1.0})
    store.put_step(1, {"loss": 0.25, "reward": 0.1})
    assert store.list_steps() == [(0, {"loss": 1.0}), (1, {"loss": 0.25, "reward": 0.1})]
    store.set_meta("model", {"path": "/m"})
    assert store.get_meta("model") == {"path": "/m"} and store.get_meta("x", 5) == 5


def test_threads_write_concurrently(tmp_path):
    store = RunStore(tmp_path)

    def work(t: int) -> None:
        for i in range(25):
            store.insert_call(make_call(i, rollout=f"t{t}"))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert store.count_calls() == 200
    assert [c.seq for c in store.list_calls(["t3"])] == list(range(25))
    store.close()


def _proc_writer(run_dir: str, rollout: str) -> None:
    store = RunStore(run_dir)
    for i in range(20):
        store.insert_call(make_call(i, rollout=rollout))
    store.close()


def test_processes_write_concurrently(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_proc_writer, args=(str(tmp_path), f"p{i}")) for i in range(3)]
    for p in procs:
        p.start()
    reader = RunStore(tmp_path)
    for p in procs:
        p.join(300)
        assert p.exitcode == 0
    assert reader.count_calls() == 60
    assert {c.rollout_id for c in reader.list_calls()} == {"p0", "p1", "p2"}


def test_duplicate_call_id_rejected(tmp_path):
    store = RunStore(tmp_path)
    store.insert_call(make_call(1))
    with pytest.raises(sqlite3.IntegrityError):
        store.insert_call(make_call(1))
    assert store.count_calls() == 1


def test_export_jsonl_and_parquet(tmp_path):
    import pyarrow.parquet as pq

    store = RunStore(tmp_path / "run")
    store.insert_calls([make_call(i) for i in range(3)])
    n = store.export_calls(tmp_path / "out" / "calls.jsonl")
    lines = (tmp_path / "out" / "calls.jsonl").read_text().splitlines()
    assert n == 3 and len(lines) == 3
    first = json.loads(lines[0])
    assert first["prompt_ids"] == [1, 2, 3, 70000] and first["request"]["ü"] == "ß"
    assert store.export_calls(tmp_path / "calls.parquet") == 3
    table = pq.read_table(tmp_path / "calls.parquet")
    assert table.num_rows == 3
    assert table.column("sampled_ids").to_pylist()[2] == [5, 6, 2]
    assert table.column("prompt_provenance").to_pylist()[0] == [PROMPT, PROMPT, 3, PROMPT]
    with pytest.raises(ExportError):
        store.export_calls(tmp_path / "calls.csv")


def test_closed_store_refuses(tmp_path):
    from harnessrl.store import StoreError

    store = RunStore(tmp_path)
    store.close()
    with pytest.raises(StoreError):
        store.count_calls()
    store.close()


def test_bad_synchronous_value(tmp_path):
    with pytest.raises(ValueError):
        RunStore(tmp_path, synchronous="sometimes")


def chain(n: int, rollout: str = "c", version: int = 0) -> list[CallRecord]:
    """n calls where each prompt extends the previous prompt + sampled ids (exact history)."""
    calls, prompt, prov = [], list(range(1, 41)), [PROMPT] * 40
    for i in range(n):
        sampled = [100 + i, 200 + i]
        calls.append(CallRecord(f"{rollout}{i}", rollout, i, "openai.chat", list(prompt), sampled, [-0.5, -0.25],
                                list(prov), version, 1.0, 1.0, "stop"))
        prompt = prompt + sampled + [7, 8, 9]
        prov = prov + [version] * 2 + [PROMPT] * 3
    return calls


def test_prefix_delta_round_trip_and_size(tmp_path):
    store = RunStore(tmp_path)
    calls = chain(30)
    for c in calls:
        store.insert_call(c)
    assert store.list_calls() == calls
    assert store.get_call("c29", include_raw=False) == calls[29]
    conn = sqlite3.connect(store.path)
    stored = conn.execute("SELECT SUM(LENGTH(prompt_ids)), COUNT(base_call) FROM calls").fetchone()
    assert stored[1] == 29  # every call after the first references its predecessor
    assert stored[0] == 4 * (40 + 29 * 3)  # only the new ids are stored
    assert conn.execute("SELECT n_prompt FROM calls WHERE call_id = 'c29'").fetchone()[0] == len(calls[29].prompt_ids)


def test_prefix_delta_only_when_exact(tmp_path):
    store = RunStore(tmp_path)
    a, b = chain(2)
    store.insert_call(a)
    rerendered = CallRecord("y", "c", 1, "openai.chat", list(b.prompt_ids), [6], [-1.0], [PROMPT] * len(b.prompt_ids),
                            0, 1.0, 1.0, "stop")
    store.insert_call(rerendered)  # ids extend a, provenance does not: ids delta-coded, provenance in full
    branch = CallRecord("x", "c", 2, "openai.chat", a.prompt_ids + [999], [5], [-1.0], a.prompt_provenance + [PROMPT],
                        0, 1.0, 1.0, "stop")
    store.insert_call(branch)  # branches inside y's prompt: shares its first 40 ids
    assert store.list_calls() == [a, rerendered, branch]
    rows = sqlite3.connect(store.path).execute("SELECT call_id, base_call, prov_from_base FROM calls").fetchall()
    assert rows == [("c0", None, 0), ("y", "c0", 0), ("x", "y", 1)]


def test_failed_batch_does_not_leave_a_dangling_base(tmp_path):
    store = RunStore(tmp_path)
    a, b, c = chain(3)
    store.insert_call(a)
    with pytest.raises(sqlite3.IntegrityError):
        store.insert_calls([b, a])  # a is a duplicate: the whole batch rolls back
    store.insert_call(c)
    assert store.list_calls() == [a, c]
    store.insert_call(b)
    assert store.list_calls() == [a, b, c]


def test_old_schema_is_migrated(tmp_path):
    from harnessrl.store.schema import SCHEMA

    v1 = "\n".join(line for line in SCHEMA.splitlines() if not line.strip().startswith(("base_", "prov_from")))
    conn = sqlite3.connect(tmp_path / "harnessrl.sqlite")
    conn.executescript(v1)
    conn.commit()
    conn.close()
    store = RunStore(tmp_path)
    cols = {r[1] for r in sqlite3.connect(store.path).execute("PRAGMA table_info(calls)")}
    assert {"base_call", "base_len", "prov_from_base"} <= cols


def _insert_then_die(run_dir: str) -> None:
    import os
    import signal

    store = RunStore(run_dir)
    for i in range(5):
        store.insert_call(make_call(i, rollout="killed"))
    os.kill(os.getpid(), signal.SIGKILL)  # no close, no checkpoint


def test_committed_calls_survive_sigkill(tmp_path):
    proc = multiprocessing.get_context("spawn").Process(target=_insert_then_die, args=(str(tmp_path),))
    proc.start()
    proc.join(300)
    assert proc.exitcode == -9
    assert [c.seq for c in RunStore(tmp_path).list_calls(["killed"])] == [0, 1, 2, 3, 4]


def test_raw_bodies_are_compressed(tmp_path):
    store = RunStore(tmp_path)
    big = {"messages": [{"role": "user", "content": "the same tool output line\n" * 2000}]}
    store.insert_call(CallRecord("b", "r", 0, "anthropic.messages", [1], [2], [-1.0], [PROMPT], 0, 1.0, 1.0, "stop",
                                 request=big, response={"ok": True}))
    size = sqlite3.connect(store.path).execute("SELECT LENGTH(request) FROM calls").fetchone()[0]
    assert size < len(json.dumps(big)) / 10
    assert store.get_call("b").request == big


def test_branch_shares_the_longest_common_prefix(tmp_path):
    store = RunStore(tmp_path)
    shared = list(range(1000, 1100))
    a = CallRecord("a", "o", 0, "openai.chat", shared + [1, 2, 3], [4, 5], [-0.5, -0.5], [PROMPT] * 103, 0, 1.0, 1.0,
                   "stop")
    # the harness dropped its trailing context message: the next prompt branches inside a's prompt
    b = CallRecord("b", "o", 1, "openai.chat", shared + [4, 5, 9, 9], [6], [-0.5], [PROMPT] * 104, 0, 1.0, 1.0, "stop")
    store.insert_calls([a, b])
    assert store.list_calls() == [a, b]
    row = sqlite3.connect(store.path).execute("SELECT base_call, base_len, LENGTH(prompt_ids) FROM calls "
                                              "WHERE call_id = 'b'").fetchone()
    assert row == ("a", 100, 4 * 4)


from hypothesis import given, strategies as st  # noqa: E402


@given(st.lists(st.integers(0, 3), max_size=40), st.lists(st.integers(0, 3), max_size=40))
def test_common_prefix_matches_naive(a, b):
    from harnessrl.store.prefix import common_prefix

    naive = 0
    while naive < min(len(a), len(b)) and a[naive] == b[naive]:
        naive += 1
    assert common_prefix(a, b) == naive


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "harness_calls"


@pytest.mark.parametrize("harness", ["claude-code", "codex", "openclaw", "mini-swe-agent"])
def test_real_harness_calls_round_trip(tmp_path, harness):
    """Calls captured from the real harnesses (committed fixtures) come back exactly, stored compactly."""
    path = FIXTURES / f"{harness}.jsonl"
    if not path.exists():
        pytest.skip(f"no fixture {path.name}")
    fields = set(CallRecord.__dataclass_fields__)
    calls = [CallRecord(**{k: v for k, v in json.loads(line).items() if k in fields})
             for line in path.read_text().splitlines()]
    store = RunStore(tmp_path)
    store.insert_calls(calls)
    back = {c.call_id: c for c in store.list_calls(include_raw=True)}
    for c in calls:
        got = back[c.call_id]
        assert got.prompt_ids == c.prompt_ids and got.sampled_ids == c.sampled_ids
        assert got.prompt_provenance == c.prompt_provenance and got.request == c.request
        assert got.logprobs == pytest.approx(c.logprobs, abs=1e-6)
    stored = sqlite3.connect(store.path).execute("SELECT SUM(LENGTH(prompt_ids)) FROM calls").fetchone()[0]
    assert stored < 4 * sum(len(c.prompt_ids) for c in calls)


def test_call_summaries_without_ids(tmp_path):
    store = RunStore(tmp_path)
    store.insert_calls([make_call(1, "b"), make_call(0, "a")])
    rows = store.list_call_summaries()
    assert [(r["rollout_id"], r["seq"], r["n_prompt"], r["n_sampled"]) for r in rows] == [("a", 0, 4, 3), ("b", 1, 4, 3)]
    assert rows[0]["meta"]["endpoint"] == "/v1/messages" and "prompt_ids" not in rows[0]
    assert store.list_call_summaries(["b"])[0]["call_id"] == "call-b-1" and store.list_call_summaries([]) == []


def test_list_calls_as_arrays_matches_lists(tmp_path):
    import numpy as np

    store = RunStore(tmp_path)
    calls = chain(6)
    rerendered = CallRecord("y", "c", 6, "openai.chat", calls[-1].prompt_ids + calls[-1].sampled_ids + [3], [6],
                            [-1.0], [PROMPT] * (len(calls[-1].prompt_ids) + 3), 0, 1.0, 1.0, "stop")
    store.insert_calls(calls + [rerendered])
    lists = store.list_calls()
    arrays = store.list_calls(as_arrays=True)
    assert [c.call_id for c in arrays] == [c.call_id for c in lists]
    for a, b in zip(arrays, lists):
        assert a.prompt_ids.dtype == np.int32 and a.logprobs.dtype == np.float32
        assert a.prompt_ids.tolist() == b.prompt_ids and a.sampled_ids.tolist() == b.sampled_ids
        assert a.prompt_provenance.tolist() == b.prompt_provenance and a.logprobs.tolist() == b.logprobs
    assert store.get_call("y", as_arrays=True).prompt_ids.tolist() == rerendered.prompt_ids


def test_connections_of_finished_threads_are_closed(tmp_path):
    store = RunStore(tmp_path)
    for i in range(50):  # e.g. a runner that writes each rollout from a short-lived thread
        th = threading.Thread(target=store.put_step, args=(i, {"i": i}))
        th.start()
        th.join()
    store.count_calls()  # a new connection prunes those of ended threads
    assert len(store._conns) <= 2  # noqa: SLF001
    assert len(store.list_steps()) == 50


def test_rollout_profile_round_trip_and_old_rollouts_open(tmp_path):
    from harnessrl.store.records import RolloutRecord
    from harnessrl.store.schema import SCHEMA

    store = RunStore(tmp_path / "new")
    rec = RolloutRecord("r1", "t", "claude-code:small", "g", "context_exceeded", None, profile="small")
    store.put_rollout(rec)
    assert store.get_rollout("r1") == rec
    # a run dir written before profiles existed (no profile column): it opens, rollouts read back with ""
    old = "\n".join(line for line in SCHEMA.splitlines() if not line.strip().startswith("profile"))
    old = old.replace("meta TEXT,\n);", "meta TEXT\n);")
    path = tmp_path / "old"
    path.mkdir()
    conn = sqlite3.connect(path / "harnessrl.sqlite")
    conn.executescript(old)
    conn.execute("INSERT INTO rollouts (rollout_id, task_id, harness, group_id, status, reward, step, sample_idx, "
                 "category, split, call_count, error) VALUES ('o', 't', 'builtin', 'g', 'ok', 1.0, 0, 0, 'c', "
                 "'test', 2, '')")
    conn.commit()
    conn.close()
    got = RunStore(path).get_rollout("o")
    assert (got.harness, got.status, got.reward, got.profile) == ("builtin", "ok", 1.0, "")
