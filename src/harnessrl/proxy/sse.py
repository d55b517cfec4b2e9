"""Server-sent-event framing. Anthropic and Responses streams name each event; OpenAI Chat
streams send bare `data:` lines and end with `data: [DONE]`. `StreamedBody`: the events of one
streamed answer, queued as they are made and read by the HTTP response."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from harnessrl.proxy.jsonutil import dumps

DONE = b"data: [DONE]\n\n"


def event(name: str, data: Any) -> bytes:
    """One named event: `event: <name>` + one `data:` line of compact JSON."""
    return b"event: " + name.encode() + b"\ndata: " + dumps(data) + b"\n\n"


def data(payload: Any) -> bytes:
    """One unnamed event (OpenAI Chat chunk)."""
    return b"data: " + dumps(payload) + b"\n\n"


class StreamedBody:
    """The events of a streamed answer, queued by the call's producer task (`done`) as they are
    made and read by the HTTP response (app.py); None ends them."""

    def __init__(self) -> None:
        self._chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.done: asyncio.Future[None] | None = None  # the producer: the call is stored when it ends
        self.sent = 0  # bytes queued so far
        self.sent_all = False  # the reader took the end: every event was handed to the connection

    def put(self, events: list[bytes]) -> None:
        chunk = b"".join(events)
        if chunk:
            self.sent += len(chunk)
            self._chunks.put_nowait(chunk)

    def end(self) -> None:
        self._chunks.put_nowait(None)

    async def events(self, keepalive: bytes, every_s: float) -> AsyncIterator[bytes]:
        """The queued events as they come, `keepalive` after every `every_s` seconds without one."""
        while True:
            try:
                chunk = await asyncio.wait_for(self._chunks.get(), every_s)
            except TimeoutError:
                yield keepalive
                continue
            if chunk is None:
                self.sent_all = True
                return
            yield chunk
