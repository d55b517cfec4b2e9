"""Durable run store: SQLite (WAL) tables for calls, rollouts, steps and meta; Parquet/JSONL export.

    store = RunStore(run_dir)                  # run_dir/harnessrl.sqlite; thread- and process-safe
    store.insert_call(call) / insert_calls([...])
    store.list_calls(rollout_ids=None, include_raw=False, as_arrays=False) -> list[CallRecord]
    store.list_call_summaries(rollout_ids=None) -> list[dict]   # no ids/bodies: fast listings
    store.put_rollout(rollout) / list_rollouts(step=None, group_id=None) / get_rollout(id)
    store.put_step(step, metrics) / list_steps() / set_meta(k, v) / get_meta(k)
    store.export_calls("calls.parquet" | "calls.jsonl")

Ids are int32 blobs, delta-coded against the rollout's previous call (prefix.py); logprobs float32
(so they read back rounded to float32); raw bodies zlib-compressed JSON.
"""

from harnessrl.store.records import PROMPT, CallRecord, RolloutRecord
from harnessrl.store.run_store import RunStore, StoreError

__all__ = ["PROMPT", "CallRecord", "RolloutRecord", "RunStore", "StoreError"]
