"""Compact column codecs for the run store: token ids as int32 blobs, logprobs as float32 blobs,
dict/list payloads as JSON text, raw request/response bodies as zlib-compressed JSON blobs
(harness requests resend the whole history: 50-500 KB of repetitive JSON per call). Leaf
functions, no state."""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

try:  # the serve extra installs orjson: ~20x faster on the 50-500 KB request bodies stored per call
    import orjson
except ImportError:  # pragma: no cover
    orjson = None  # type: ignore[assignment]


def ids_to_blob(ids: list[int]) -> bytes:
    """Token ids (or provenance values, which may be -1) as a little-endian int32 blob."""
    return struct.pack(f"<{len(ids)}i", *ids)


def blob_to_ids(blob: bytes | None) -> list[int]:
    if not blob:
        return []
    return list(struct.unpack(f"<{len(blob) // 4}i", blob))


def floats_to_blob(values: list[float]) -> bytes:
    """Logprobs as a float32 blob (4 bytes a token; float32 is what engines and trainers use)."""
    return struct.pack(f"<{len(values)}f", *values)


def blob_to_floats(blob: bytes | None) -> list[float]:
    if not blob:
        return []
    return list(struct.unpack(f"<{len(blob) // 4}f", blob))


def to_json(value: Any) -> str | None:
    """JSON text for a payload column; None stays NULL. Non-JSON values are stringified, never
    raised; a value no encoder can write (nested past the recursion limit) is stored as
    `{"_unencodable": <why>}`, so storing a call never fails on what it holds."""
    if value is None:
        return None
    if orjson is not None:
        try:
            return orjson.dumps(value, default=str).decode()
        except TypeError:  # e.g. int keys beyond 64 bits, or > 255 levels: the standard library
            pass
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (RecursionError, ValueError) as e:  # too deep, or a circular reference
        return json.dumps({"_unencodable": f"{type(e).__name__}: {str(e)[:200]}"})


def from_json(text: str | None) -> Any:
    if text is None:
        return None
    return orjson.loads(text) if orjson is not None else json.loads(text)


_Z = b"z1"  # marker of a compressed JSON blob (text columns hold plain JSON)


def pack_json(value: Any) -> bytes | None:
    """JSON compressed with zlib level 1 (~10x smaller on harness requests, well under 1 ms)."""
    text = to_json(value)
    return None if text is None else _Z + zlib.compress(text.encode(), 1)


def unpack_json(data: bytes | str | None) -> Any:
    """Inverse of pack_json; also reads plain JSON text."""
    if isinstance(data, (bytes, memoryview)):
        data = bytes(data)
        if data.startswith(_Z):
            return from_json(zlib.decompress(data[len(_Z):]).decode())
        return from_json(data.decode())
    return from_json(data)


def blob_to_array(blob: bytes | None) -> Any:
    """Ids as a read-only int32 numpy view of the blob (no per-token Python objects)."""
    import numpy as np

    return np.frombuffer(blob or b"", dtype="<i4")


def blob_to_float_array(blob: bytes | None) -> Any:
    import numpy as np

    return np.frombuffer(blob or b"", dtype="<f4")
