"""Group commit of call records: one writer thread drains every call finished meanwhile into one
SQLite transaction, and each waiting request resumes only once its call is durable.

Delivery marks (`delivered(call_id)`: the answer's last byte went out) ride the same queue and
are committed with the next batch; nobody waits for them. A crash loses at most the marks still
queued, so a call can read as undelivered although it arrived, never the other way round."""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from typing import Any

from harnessrl.store import CallRecord, RunStore

log = logging.getLogger(__name__)

_STOP = object()
_MAX_BATCH = 256


class _Delivered:
    __slots__ = ("call_id",)

    def __init__(self, call_id: str):
        self.call_id = call_id


class _Flush:
    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = threading.Event()


class CallWriter:
    """`await writer.write(call)` returns after the call is committed to the store."""

    def __init__(self, store: RunStore):
        self.store = store
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="harnessrl-call-writer", daemon=True)
        self._thread.start()

    async def write(self, call: CallRecord) -> None:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._queue.put((call, done, loop))
        await done

    def delivered(self, call_id: str) -> None:
        """Queue the mark that `call_id`'s answer was delivered (committed with the next batch)."""
        self._queue.put(_Delivered(call_id))

    def flush(self, timeout_s: float = 30.0) -> None:
        """Return once everything queued before this call (calls and delivery marks) is committed."""
        if self._thread.is_alive():
            item = _Flush()
            self._queue.put(item)
            item.done.wait(timeout_s)

    def close(self) -> None:
        """Commit what is queued, then stop the thread."""
        if self._thread.is_alive():
            self._queue.put(_STOP)
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            first = self._queue.get()
            if first is _STOP:
                return
            batch = [first]
            stop = False
            while len(batch) < _MAX_BATCH:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stop = True
                    break
                batch.append(item)
            self._commit(batch)
            if stop:
                return

    def _commit(self, items: list[Any]) -> None:
        marks = [item.call_id for item in items if isinstance(item, _Delivered)]
        flushes = [item for item in items if isinstance(item, _Flush)]
        batch = [item for item in items if not isinstance(item, (_Delivered, _Flush))]
        if batch:
            self._commit_calls(batch)
        if marks:  # after the inserts: a mark always follows its call's commit in the queue
            try:
                self.store.mark_delivered(marks)
            except Exception:  # a lost mark only makes a call read as undelivered
                log.exception("could not mark %d calls delivered", len(marks))
        for flush in flushes:
            flush.done.set()

    def _commit_calls(self, batch: list[tuple[CallRecord, asyncio.Future, asyncio.AbstractEventLoop]]) -> None:
        try:
            self.store.insert_calls([call for call, _, _ in batch])
            outcomes: list[BaseException | None] = [None] * len(batch)
        except Exception:  # one bad row must not fail the others: retry one by one
            outcomes = [self._commit_one(call) for call, _, _ in batch]
        for (_, fut, loop), err in zip(batch, outcomes):
            try:
                loop.call_soon_threadsafe(_resolve, fut, err)
            except RuntimeError:  # the server's loop is already closed: nobody waits any more
                pass

    def _commit_one(self, call: CallRecord) -> BaseException | None:
        try:
            self.store.insert_call(call)
            return None
        except Exception as e:  # reported to the waiting request, which answers 500
            return e


def _resolve(fut: asyncio.Future, err: BaseException | None) -> None:
    if fut.done():
        return
    if err is None:
        fut.set_result(None)
    else:
        fut.set_exception(err)
