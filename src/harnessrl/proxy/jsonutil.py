"""JSON for the hot path: orjson when installed (the serve extra), the standard library otherwise.

Request bodies are parsed with a nesting limit (`loads_bounded`): a value nested deeper than
`MAX_JSON_DEPTH` (objects and arrays; the body itself is level 1) is refused with `TooDeep`, in
any field, read or ignored. Nothing a harness sends nests near it (Claude Code's deepest tool
schema: ~10 levels), and everything downstream (pydantic, the store's encoder) recurses per
level, so a bound far below the recursion limits keeps every later step total."""

from __future__ import annotations

import json
from typing import Any

from harnessrl.errors import HarnessRLError

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


MAX_JSON_DEPTH = 128  # deepest nesting of objects/arrays accepted in a request body (docs/proxy.md)


class TooDeep(HarnessRLError, ValueError):
    """A JSON body nested deeper than the limit."""

    def __init__(self, limit: int):
        super().__init__(f"JSON nested deeper than {limit} levels (objects and arrays; the proxy's limit)")
        self.limit = limit


def depth_exceeds(value: Any, limit: int) -> bool:
    """Whether `value` nests objects/arrays deeper than `limit` levels (iterative: no recursion)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def loads_bounded(data: bytes | str, limit: int = MAX_JSON_DEPTH) -> Any:
    """`loads` that refuses nesting past `limit` (TooDeep). orjson itself stops at 1024 levels
    (a DecodeError); whatever it accepts is checked here."""
    try:
        value = loads(data)
    except DecodeError as e:
        if "recursion" in str(e).lower() or "depth" in str(e).lower():
            raise TooDeep(limit) from None
        raise
    except RecursionError:  # the standard library's parser
        raise TooDeep(limit) from None
    if depth_exceeds(value, limit):
        raise TooDeep(limit)
    return value


def dumps_str(value: Any) -> str:
    """Compact JSON text (tool-call arguments, SSE payload strings)."""
    return dumps(value).decode()
