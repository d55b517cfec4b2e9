"""SQLite schema of a run directory (`<run_dir>/harnessrl.sqlite`) and row <-> record mapping.

Tables: `calls` (one row per model call, ids as int32 blobs, logprobs as float32 blobs; prompt ids
delta-coded against an earlier call of the same rollout, see prefix.py),
`rollouts` (RolloutRecord, upserted), `steps` (step -> metrics JSON), `meta` (key -> JSON value).
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict
from typing import Any

from harnessrl.store.codec import (
    blob_to_array, blob_to_float_array, blob_to_floats, blob_to_ids, floats_to_blob, from_json, ids_to_blob,
    pack_json, to_json, unpack_json,
)
from harnessrl.store.prefix import Delta, expand
from harnessrl.store.records import CallRecord, Lineage, RolloutRecord

DB_NAME = "harnessrl.sqlite"
SCHEMA_VERSION = 5
# columns added since schema 1 (added by ALTER TABLE when an older database is opened)
MIGRATIONS = (
    ("calls", "base_call", "TEXT"),
    ("calls", "base_len", "INTEGER NOT NULL DEFAULT 0"),
    ("calls", "prov_from_base", "INTEGER NOT NULL DEFAULT 0"),
    ("rollouts", "profile", "TEXT NOT NULL DEFAULT ''"),  # schema 3: the harness profile
    # schema 4: 0 until the proxy handed the answer's last byte to an open connection; calls of
    # older run directories read as delivered (1), as they were read before
    ("calls", "delivered", "INTEGER NOT NULL DEFAULT 1"),
    ("rollouts", "lineage", "TEXT"),  # schema 5: a branch's parent and branch call (JSON; NULL: none)
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    call_id TEXT PRIMARY KEY,
    rollout_key TEXT NOT NULL DEFAULT '',
    rollout_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    protocol TEXT NOT NULL,
    endpoint TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL,
    error TEXT NOT NULL DEFAULT '',
    policy_version INTEGER NOT NULL,
    temperature REAL NOT NULL,
    top_p REAL NOT NULL,
    finish_reason TEXT NOT NULL,
    n_prompt INTEGER NOT NULL,
    n_sampled INTEGER NOT NULL,
    prompt_ids BLOB,
    base_call TEXT,
    base_len INTEGER NOT NULL DEFAULT 0,
    prov_from_base INTEGER NOT NULL DEFAULT 0,
    sampled_ids BLOB,
    logprobs BLOB,
    prompt_provenance BLOB,
    sampling TEXT,
    t_start REAL NOT NULL,
    t_end REAL NOT NULL,
    request BLOB,
    response BLOB,
    meta TEXT,
    delivered INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX IF NOT EXISTS calls_by_rollout ON calls (rollout_id, seq);
CREATE TABLE IF NOT EXISTS rollouts (
    rollout_id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL,
    harness TEXT NOT NULL,
    group_id TEXT NOT NULL,
    status TEXT NOT NULL,
    reward REAL,
    step INTEGER NOT NULL,
    sample_idx INTEGER NOT NULL,
    category TEXT NOT NULL,
    split TEXT NOT NULL,
    call_count INTEGER NOT NULL,
    error TEXT NOT NULL,
    checks TEXT,
    durations TEXT,
    meta TEXT,
    profile TEXT NOT NULL DEFAULT '',
    lineage TEXT
);
CREATE INDEX IF NOT EXISTS rollouts_by_step ON rollouts (step, group_id);
CREATE TABLE IF NOT EXISTS steps (
    step INTEGER PRIMARY KEY,
    metrics TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT
);
"""

CALL_COLUMNS = (
    "call_id", "rollout_key", "rollout_id", "seq", "protocol", "endpoint", "status", "error",
    "policy_version", "temperature", "top_p", "finish_reason", "n_prompt", "n_sampled",
    "prompt_ids", "base_call", "base_len", "prov_from_base", "sampled_ids", "logprobs", "prompt_provenance", "sampling",
    "t_start", "t_end", "request", "response", "meta", "delivered",
)
INSERT_CALL = f"INSERT INTO calls ({', '.join(CALL_COLUMNS)}) VALUES ({', '.join('?' * len(CALL_COLUMNS))})"

ROLLOUT_COLUMNS = (
    "rollout_id", "task_id", "harness", "group_id", "status", "reward", "step", "sample_idx",
    "category", "split", "call_count", "error", "checks", "durations", "meta", "profile", "lineage",
)
UPSERT_ROLLOUT = (
    f"INSERT OR REPLACE INTO rollouts ({', '.join(ROLLOUT_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(ROLLOUT_COLUMNS))})"
)


def call_to_row(call: CallRecord, delta: Delta) -> tuple[Any, ...]:
    """A CallRecord as a `calls` row. meta keys `rollout_key`, `endpoint`, `error`, `sampling`
    are lifted into their own columns (they stay in meta too, so a round trip is lossless)."""
    meta = call.meta or {}
    return (
        call.call_id, str(meta.get("rollout_key", "")), call.rollout_id, call.seq, call.protocol,
        str(meta.get("endpoint", "")), call.status, str(meta.get("error", "")),
        call.policy_version, float(call.temperature), float(call.top_p), call.finish_reason,
        len(call.prompt_ids), len(call.sampled_ids),
        ids_to_blob(delta.prompt_ids), delta.base_call, delta.base_len, int(delta.prov_from_base),
        ids_to_blob(call.sampled_ids), floats_to_blob(call.logprobs),
        ids_to_blob(delta.provenance), to_json(meta.get("sampling")),
        call.t_start, call.t_end, pack_json(call.request), pack_json(call.response), to_json(meta),
        int(call.delivered),
    )


def row_to_call(row: sqlite3.Row, include_raw: bool, base: CallRecord | None = None,
                as_arrays: bool = False) -> CallRecord:
    """A CallRecord from a row; `base` is the call named by the row's base_call (None if none).
    `as_arrays`: ids, provenance and logprobs as numpy int32/float32 arrays instead of lists."""
    ids_of = blob_to_array if as_arrays else blob_to_ids
    prompt_ids, provenance = expand(base, row["base_len"], bool(row["prov_from_base"]),
                                    ids_of(row["prompt_ids"]), ids_of(row["prompt_provenance"]))
    return CallRecord(
        call_id=row["call_id"],
        rollout_id=row["rollout_id"],
        seq=row["seq"],
        protocol=row["protocol"],
        prompt_ids=prompt_ids,
        sampled_ids=ids_of(row["sampled_ids"]),
        logprobs=(blob_to_float_array if as_arrays else blob_to_floats)(row["logprobs"]),
        prompt_provenance=provenance,
        policy_version=row["policy_version"],
        temperature=row["temperature"],
        top_p=row["top_p"],
        finish_reason=row["finish_reason"],
        status=row["status"],
        t_start=row["t_start"],
        t_end=row["t_end"],
        request=unpack_json(row["request"]) if include_raw else None,
        response=unpack_json(row["response"]) if include_raw else None,
        meta=from_json(row["meta"]) or {},
        delivered=bool(row["delivered"]),
    )


def rollout_to_row(r: RolloutRecord) -> tuple[Any, ...]:
    return (
        r.rollout_id, r.task_id, r.harness, r.group_id, r.status, r.reward, r.step, r.sample_idx,
        r.category, r.split, r.call_count, r.error, to_json(r.checks), to_json(r.durations), to_json(r.meta),
        r.profile, None if r.lineage is None else to_json(r.lineage.to_json()),
    )


def row_to_rollout(row: sqlite3.Row) -> RolloutRecord:
    return RolloutRecord(
        rollout_id=row["rollout_id"],
        task_id=row["task_id"],
        harness=row["harness"],
        group_id=row["group_id"],
        status=row["status"],
        reward=row["reward"],
        checks=from_json(row["checks"]) or {},
        step=row["step"],
        sample_idx=row["sample_idx"],
        category=row["category"],
        split=row["split"],
        call_count=row["call_count"],
        durations=from_json(row["durations"]) or {},
        error=row["error"],
        meta=from_json(row["meta"]) or {},
        profile=row["profile"] if "profile" in row.keys() else "",
        lineage=Lineage.from_json(from_json(row["lineage"])) if "lineage" in row.keys() and row["lineage"] else None,
    )


def call_to_dict(call: CallRecord) -> dict[str, Any]:
    """Plain dict of a CallRecord (for JSON/JSONL output)."""
    return asdict(call)
