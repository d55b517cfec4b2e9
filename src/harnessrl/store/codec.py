"""Compact column codecs for the run store: token ids as int32 blobs, logprobs as float32 blobs,
dict/list payloads as JSON text. Leaf functions, no state."""

from __future__ import annotations

import json
from array import array
from typing import Any


def ids_to_blob(ids: list[int]) -> bytes:
    """Token ids (or provenance values, which may be -1) as a little-endian int32 blob."""
    return array("i", ids).tobytes()


def blob_to_ids(blob: bytes | None) -> list[int]:
    if not blob:
        return []
    out = array("i")
    out.frombytes(blob)
    return out.tolist()


def floats_to_blob(values: list[float]) -> bytes:
    """Logprobs as a float32 blob (4 bytes a token; float32 is what engines and trainers use)."""
    return array("f", values).tobytes()


def blob_to_floats(blob: bytes | None) -> list[float]:
    if not blob:
        return []
    out = array("f")
    out.frombytes(blob)
    return out.tolist()


def to_json(value: Any) -> str | None:
    """JSON text for a payload column; None stays NULL. Non-JSON values are stringified, never raised."""
    if value is None:
        return None
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def from_json(text: str | None) -> Any:
    if text is None:
        return None
    return json.loads(text)
