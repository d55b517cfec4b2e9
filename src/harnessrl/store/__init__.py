"""Durable run store: SQLite (WAL) tables for calls, rollouts, steps and meta; Parquet/JSONL export."""

from harnessrl.store.records import PROMPT, CallRecord, RolloutRecord
from harnessrl.store.run_store import RunStore, StoreError

__all__ = ["PROMPT", "CallRecord", "RolloutRecord", "RunStore", "StoreError"]
