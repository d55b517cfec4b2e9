"""What an engine reports about its own work: prefix-cache hits, prefill and decode time, CPU.

Per request, vLLM says how many prompt tokens its prefix cache served (`RequestOutput.num_cached_tokens`,
the scheduler's count; over HTTP `usage.prompt_tokens_details.cached_tokens`) and when the request was
queued, scheduled, produced its first token and its last (`RequestOutput.metrics`, engine-core
timestamps). `request_stats` turns those into the numbers a call record keeps (the proxy stores
`Generation.timings` in the call's meta as `engine_<name>`); `EngineCounters` sums them over the
engine's life, so a caller takes the difference of two snapshots for one step. Nothing here is
estimated: a request the engine reported no figure for counts in `requests`, not in `reported`.

Prefill and decode seconds are request-seconds: concurrent requests overlap, so their sum can pass
the wall time that they took.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any

import psutil

COUNTER_KEYS = ("requests", "reported", "prompt_tokens", "cached_tokens", "sampled_tokens", "queue_s",
                "prefill_s", "decode_s")


def request_stats(out: Any) -> dict[str, float]:
    """{cached_tokens, queue_s, prefill_s, decode_s} of one finished vLLM RequestOutput, where the
    engine reported them."""
    stats: dict[str, float] = {}
    cached = getattr(out, "num_cached_tokens", None)
    if isinstance(cached, int):
        stats["cached_tokens"] = float(cached)
    m = getattr(out, "metrics", None)
    queued, scheduled = getattr(m, "queued_ts", 0.0) or 0.0, getattr(m, "scheduled_ts", 0.0) or 0.0
    first, last = getattr(m, "first_token_ts", 0.0) or 0.0, getattr(m, "last_token_ts", 0.0) or 0.0
    if queued and scheduled >= queued:
        stats["queue_s"] = scheduled - queued
    if scheduled and first >= scheduled:
        stats["prefill_s"] = first - scheduled
    if first and last >= first:
        stats["decode_s"] = last - first
    return stats


def usage_stats(data: Mapping[str, Any]) -> dict[str, float]:
    """{cached_tokens} of an OpenAI-style completion response (vLLM serve with
    --enable-prompt-tokens-details), where it is there."""
    usage = data.get("usage") if isinstance(data, Mapping) else None
    details = usage.get("prompt_tokens_details") if isinstance(usage, Mapping) else None
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    return {"cached_tokens": float(cached)} if isinstance(cached, (int, float)) else {}


class EngineCounters:
    """Thread-safe running sums over an engine's requests (see COUNTER_KEYS)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sums = dict.fromkeys(COUNTER_KEYS, 0.0)

    def add(self, prompt_tokens: int, sampled_tokens: int, stats: Mapping[str, float]) -> None:
        with self._lock:
            s = self._sums
            s["requests"] += 1
            s["prompt_tokens"] += prompt_tokens
            s["sampled_tokens"] += sampled_tokens
            if "cached_tokens" in stats:
                s["reported"] += 1
                s["cached_tokens"] += stats["cached_tokens"]
            for key in ("queue_s", "prefill_s", "decode_s"):
                s[key] += float(stats.get(key, 0.0))

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return dict(self._sums)


def counter_delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """after - before, key by key (keys of `after`)."""
    return {k: float(v) - float(before.get(k, 0.0)) for k, v in after.items()}


def process_cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU seconds of the processes `pids` and their live descendants, including the
    children they have reaped; processes that are gone count 0."""
    seen: set[int] = set()
    total = 0.0
    for pid in pids:
        try:
            root = psutil.Process(pid)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            continue
        for p in procs:
            if p.pid in seen:
                continue
            seen.add(p.pid)
            try:
                t = p.cpu_times()
            except psutil.Error:
                continue
            total += t.user + t.system + t.children_user + t.children_system
    return total
