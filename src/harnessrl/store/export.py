"""Export captured calls to Parquet (pyarrow) or JSON Lines."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from harnessrl.errors import HarnessRLError
from harnessrl.store.records import CallRecord


class ExportError(HarnessRLError, ValueError):
    """Unsupported export path (the suffix must be .parquet or .jsonl)."""


def export_calls(calls: list[CallRecord], path: Path) -> int:
    """Write `calls` to `path` by its suffix; returns the number of calls written."""
    suffix = path.suffix.lower()
    if suffix not in (".parquet", ".jsonl"):
        raise ExportError(f"cannot export to {path.name!r}: use a .parquet or .jsonl file name")
    path.parent.mkdir(parents=True, exist_ok=True)
    if suffix == ".jsonl":
        _write_jsonl(calls, path)
    else:
        _write_parquet(calls, path)
    return len(calls)


def _write_jsonl(calls: list[CallRecord], path: Path) -> None:
    with path.open("w", encoding="utf-8") as f:
        for call in calls:
            f.write(json.dumps(asdict(call), ensure_ascii=False, default=str))
            f.write("\n")


def _write_parquet(calls: list[CallRecord], path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    def js(value: object) -> str | None:
        return None if value is None else json.dumps(value, ensure_ascii=False, default=str)

    table = pa.table(
        {
            "call_id": pa.array([c.call_id for c in calls], pa.string()),
            "rollout_id": pa.array([c.rollout_id for c in calls], pa.string()),
            "seq": pa.array([c.seq for c in calls], pa.int32()),
            "protocol": pa.array([c.protocol for c in calls], pa.string()),
            "prompt_ids": pa.array([c.prompt_ids for c in calls], pa.list_(pa.int32())),
            "sampled_ids": pa.array([c.sampled_ids for c in calls], pa.list_(pa.int32())),
            "logprobs": pa.array([c.logprobs for c in calls], pa.list_(pa.float32())),
            "prompt_provenance": pa.array([c.prompt_provenance for c in calls], pa.list_(pa.int32())),
            "policy_version": pa.array([c.policy_version for c in calls], pa.int64()),
            "temperature": pa.array([c.temperature for c in calls], pa.float64()),
            "top_p": pa.array([c.top_p for c in calls], pa.float64()),
            "finish_reason": pa.array([c.finish_reason for c in calls], pa.string()),
            "status": pa.array([c.status for c in calls], pa.string()),
            "t_start": pa.array([c.t_start for c in calls], pa.float64()),
            "t_end": pa.array([c.t_end for c in calls], pa.float64()),
            "request": pa.array([js(c.request) for c in calls], pa.string()),
            "response": pa.array([js(c.response) for c in calls], pa.string()),
            "meta": pa.array([js(c.meta) for c in calls], pa.string()),
        }
    )
    pq.write_table(table, path)
