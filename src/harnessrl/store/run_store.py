"""`RunStore`: the durable record of a run, one SQLite database in WAL mode per run directory.

Thread-safe (one connection per thread) and safe to open from several processes at once (WAL +
busy timeout). Every write is a committed transaction before the method returns. Durability:
with `synchronous="normal"` (default; WAL) a committed call survives a crash or SIGKILL of any
process (proxy, runner, trainer); `synchronous="full"` also survives an OS crash or power loss, at
the cost of one fsync per commit (the proxy group-commits, so that costs latency, not throughput).
The proxy commits each call before the last byte of its response goes out.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any, Iterable

from harnessrl.errors import HarnessRLError
from harnessrl.store import schema
from harnessrl.store.codec import from_json, to_json
from harnessrl.store.prefix import PrefixCache
from harnessrl.store.records import CallRecord, RolloutRecord


class StoreError(HarnessRLError, RuntimeError):
    """The run store cannot be opened or written (bad path, corrupt file, disk full)."""


class RunStore:
    """Calls, rollouts, steps and meta of one run directory (`run_dir/harnessrl.sqlite`)."""

    def __init__(self, run_dir: str | Path, synchronous: str = "normal", busy_timeout_s: float = 30.0):
        if synchronous.lower() not in ("off", "normal", "full", "extra"):
            raise ValueError(f"synchronous must be off|normal|full|extra, got {synchronous!r}")
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / schema.DB_NAME
        self._synchronous = synchronous.upper()
        self._busy_timeout_ms = int(busy_timeout_s * 1000)
        self._local = threading.local()
        self._conns: list[tuple[threading.Thread, sqlite3.Connection]] = []  # (owner thread, connection)
        self._lock = threading.Lock()
        self._closed = False
        self._prefix = PrefixCache()
        self._write_lock = threading.Lock()  # a delta base must be committed before another write uses it
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create run directory {self.run_dir}: {e}") from e
        conn = self._conn()
        with conn:
            conn.executescript(schema.SCHEMA)
            _migrate(conn)
            conn.execute(
                "INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)",
                (to_json(schema.SCHEMA_VERSION),),
            )

    # -- connections ---------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        if self._closed:
            raise StoreError(f"store {self.path} is closed")
        try:
            conn = sqlite3.connect(self.path, timeout=self._busy_timeout_ms / 1000, check_same_thread=False)
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout={self._busy_timeout_ms}")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self._synchronous}")
            conn.execute("PRAGMA cache_size=-32768")  # 32 MiB page cache per connection
            conn.execute("PRAGMA wal_autocheckpoint=4000")  # checkpoint every ~16 MiB of WAL
        except sqlite3.Error as e:
            raise StoreError(f"cannot open run store {self.path}: {e}") from e
        self._local.conn = conn
        with self._lock:
            self._conns = [(t, c) for t, c in self._conns if t.is_alive() or _close(c)]  # threads that ended
            self._conns.append((threading.current_thread(), conn))
        return conn

    def journal_mode(self) -> str:
        return self._conn().execute("PRAGMA journal_mode").fetchone()[0]

    def close(self) -> None:
        """Close every thread's connection (checkpointing the WAL). Safe to call twice."""
        with self._lock:
            self._closed = True
            conns, self._conns = self._conns, []
        for _, conn in conns:
            _close(conn)
        self._local = threading.local()

    def __enter__(self) -> "RunStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- calls ---------------------------------------------------------------------------------

    def insert_call(self, call: CallRecord) -> None:
        """Commit one call (durable when this returns)."""
        self.insert_calls([call])

    def insert_calls(self, calls: Iterable[CallRecord]) -> None:
        """Commit several calls in one transaction (group commit: one sync for all). Prompt ids
        that extend the rollout's previous call are stored as a verified suffix (prefix.py)."""
        calls = list(calls)
        if not calls:
            return
        conn = self._conn()
        with self._write_lock:
            try:
                with conn:
                    for call in calls:
                        conn.execute(schema.INSERT_CALL, schema.call_to_row(call, self._prefix.encode(call)))
                        self._prefix.remember(call)  # later calls of this batch may build on it
            except BaseException:
                self._prefix.forget({c.rollout_id for c in calls})  # bases of a rolled-back batch
                raise

    def mark_delivered(self, call_ids: Iterable[str]) -> None:
        """Record that these calls' answers were handed, to their last byte, to an open connection."""
        ids = list(call_ids)
        if not ids:
            return
        conn = self._conn()
        with self._write_lock, conn:
            for start in range(0, len(ids), 500):  # SQLite's host parameter limit
                part = ids[start:start + 500]
                conn.execute(f"UPDATE calls SET delivered = 1 WHERE call_id IN ({', '.join('?' * len(part))})", part)

    def forget_rollout(self, rollout_id: str) -> None:
        """Drop the in-memory prefix base of a finished rollout (a later call of it, if any, is
        stored in full)."""
        self._prefix.forget({rollout_id})

    def list_calls(self, rollout_ids: Iterable[str] | None = None, include_raw: bool = False,
                   as_arrays: bool = False) -> list[CallRecord]:
        """Calls ordered by rollout id, then seq. `include_raw` also loads request/response bodies.
        `as_arrays`: ids/provenance/logprobs as numpy int32/float32 arrays (no per-token Python ints;
        what the tree builder converts to anyway)."""
        cols = [c for c in schema.CALL_COLUMNS if include_raw or c not in ("request", "response")]
        sql = f"SELECT {', '.join(cols)} FROM calls"
        args: list[Any] = []
        if rollout_ids is not None:
            ids = list(rollout_ids)
            if not ids:
                return []
            sql += f" WHERE rollout_id IN ({', '.join('?' * len(ids))})"
            args = ids
        rows = self._conn().execute(sql + " ORDER BY rowid", args).fetchall()
        by_id: dict[str, CallRecord] = {}
        for row in rows:  # a base call always has a smaller rowid than the calls built on it
            base_id = row["base_call"]
            base = None if base_id is None else by_id.get(base_id)
            if base_id is not None and base is None:
                base = self.get_call(base_id, include_raw=False, as_arrays=as_arrays)
            by_id[row["call_id"]] = schema.row_to_call(row, include_raw, base, as_arrays)
        return sorted(by_id.values(), key=lambda c: (c.rollout_id, c.seq))

    def list_call_summaries(self, rollout_ids: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """One dict per call without token ids or bodies (fast on big runs): ids, status, lengths,
        version, sampling, timings, meta. Ordered like list_calls."""
        cols = ("call_id", "rollout_id", "seq", "protocol", "endpoint", "status", "error", "policy_version",
                "temperature", "top_p", "finish_reason", "n_prompt", "n_sampled", "t_start", "t_end", "meta",
                "delivered")
        sql, args = f"SELECT {', '.join(cols)} FROM calls", []
        if rollout_ids is not None:
            args = list(rollout_ids)
            if not args:
                return []
            sql += f" WHERE rollout_id IN ({', '.join('?' * len(args))})"
        rows = self._conn().execute(sql + " ORDER BY rollout_id, seq, rowid", args).fetchall()
        return [{**dict(zip(cols, row)), "meta": from_json(row["meta"]) or {}} for row in rows]

    def get_call(self, call_id: str, include_raw: bool = True, as_arrays: bool = False) -> CallRecord | None:
        row = self._conn().execute("SELECT * FROM calls WHERE call_id = ?", (call_id,)).fetchone()
        if row is None:
            return None
        base = None if row["base_call"] is None else self.get_call(row["base_call"], False, as_arrays)
        return schema.row_to_call(row, include_raw, base, as_arrays)

    def count_calls(self, rollout_id: str | None = None) -> int:
        if rollout_id is None:
            return self._conn().execute("SELECT COUNT(*) FROM calls").fetchone()[0]
        return self._conn().execute("SELECT COUNT(*) FROM calls WHERE rollout_id = ?", (rollout_id,)).fetchone()[0]

    def next_seq(self, rollout_id: str) -> int:
        """1 + the highest seq stored for this rollout (0 when it has none)."""
        row = self._conn().execute("SELECT MAX(seq) FROM calls WHERE rollout_id = ?", (rollout_id,)).fetchone()
        return 0 if row[0] is None else row[0] + 1

    def quota_usage(self, rollout_id: str) -> tuple[int, int]:
        """What a rollout's calls charged to the proxy's store quota: (bytes, quota refusals
        recorded). Each call's charge is its `meta["quota_bytes"]`; a call stored without one (an
        older run) counts its stored request + response size."""
        row = self._conn().execute(
            "SELECT COALESCE(SUM(COALESCE(json_extract(meta, '$.quota_bytes'),"
            " IFNULL(length(request), 0) + IFNULL(length(response), 0))), 0),"
            " COALESCE(SUM(json_extract(meta, '$.error_kind') = 'quota'), 0)"
            " FROM calls WHERE rollout_id = ?", (rollout_id,)).fetchone()
        return int(row[0]), int(row[1])

    # -- rollouts ------------------------------------------------------------------------------

    def put_rollout(self, rollout: RolloutRecord) -> None:
        """Insert or replace the record of one rollout."""
        conn = self._conn()
        with conn:
            conn.execute(schema.UPSERT_ROLLOUT, schema.rollout_to_row(rollout))

    def list_rollouts(self, step: int | None = None, group_id: str | None = None) -> list[RolloutRecord]:
        sql, where, args = "SELECT * FROM rollouts", list[str](), list[Any]()
        if step is not None:
            where.append("step = ?")
            args.append(step)
        if group_id is not None:
            where.append("group_id = ?")
            args.append(group_id)
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY step, group_id, sample_idx, rollout_id"
        return [schema.row_to_rollout(r) for r in self._conn().execute(sql, args).fetchall()]

    def get_rollout(self, rollout_id: str) -> RolloutRecord | None:
        row = self._conn().execute("SELECT * FROM rollouts WHERE rollout_id = ?", (rollout_id,)).fetchone()
        return None if row is None else schema.row_to_rollout(row)

    # -- steps and meta ------------------------------------------------------------------------

    def put_step(self, step: int, metrics: dict[str, Any]) -> None:
        """Insert or replace the metrics of one training step."""
        conn = self._conn()
        with conn:
            conn.execute("INSERT OR REPLACE INTO steps (step, metrics) VALUES (?, ?)", (int(step), to_json(metrics)))

    def list_steps(self) -> list[tuple[int, dict[str, Any]]]:
        rows = self._conn().execute("SELECT step, metrics FROM steps ORDER BY step").fetchall()
        return [(r["step"], from_json(r["metrics"])) for r in rows]

    def set_meta(self, key: str, value: Any) -> None:
        conn = self._conn()
        with conn:
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, to_json(value)))

    def get_meta(self, key: str, default: Any = None) -> Any:
        row = self._conn().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else from_json(row["value"])

    # -- export --------------------------------------------------------------------------------

    def export_calls(self, path: str | Path, rollout_ids: Iterable[str] | None = None) -> int:
        """Write calls (with raw bodies) to `.parquet` or `.jsonl`; returns the number written."""
        from harnessrl.store.export import export_calls

        return export_calls(self.list_calls(rollout_ids, include_raw=True), Path(path))


def _migrate(conn: sqlite3.Connection) -> None:
    """Add the columns a database written by an older schema lacks."""
    for table, column, decl in schema.MIGRATIONS:
        have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
        if column not in have:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")


def _close(conn: sqlite3.Connection) -> bool:
    """Close a connection, ignoring errors; False (so it can filter a list comprehension)."""
    try:
        conn.close()
    except sqlite3.Error:
        pass
    return False
