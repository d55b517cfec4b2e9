"""JSON for the hot path: orjson when installed (the serve extra), the standard library otherwise."""

from __future__ import annotations

import json
from typing import Any

try:  # pragma: no cover - which branch runs depends on the environment
    import orjson

    def dumps(value: Any) -> bytes:
        return orjson.dumps(value, default=str)

    def loads(data: bytes | str) -> Any:
        return orjson.loads(data)

    DecodeError: type[Exception] = orjson.JSONDecodeError
except ImportError:  # pragma: no cover

    def dumps(value: Any) -> bytes:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str).encode()

    def loads(data: bytes | str) -> Any:
        return json.loads(data)

    DecodeError = json.JSONDecodeError


def dumps_str(value: Any) -> str:
    """Compact JSON text (tool-call arguments, SSE payload strings)."""
    return dumps(value).decode()
