"""One call's store record, built one way for the proxy's calls (calls.py) and the white-box loop's
(harness/whitebox.py): for the same call both paths store the same ids, sampling values and meta.

    head = CallHead(call_id, rollout.rollout_id, rollout.key, seq, "openai.chat", endpoint, "exact", t0)
    record = record_call(head, prompt_ids=..., provenance=..., gen=gen, params=params, used=used,
                         request=body, response=reply, timings={...}, delivered=False)

A served call's meta: rollout_key, endpoint, history_mode, n_prompt, model, stream, stop (dropped
when the protocol dropped request fields), sampling (the values used, proxy/serving.py: sent and
forced with them), timings and n_reused (prompt tokens reused from earlier completions). A failed
call's meta: the same head, error and error_kind, no sampling.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from harnessrl.engine.base import Generation, SamplingParams
from harnessrl.proxy.serving import Sampled
from harnessrl.store import PROMPT, CallRecord


@dataclass(frozen=True)
class CallHead:
    """Which call a record is and how it was asked: what every record of it names."""

    call_id: str
    rollout_id: str
    rollout_key: str
    seq: int
    protocol: str  # the wire protocol's name ("openai.chat", ...; "whitebox")
    endpoint: str
    history_mode: str
    t_start: float
    model: str | None = None  # as the request names it; None: the body was not parsed
    stream: bool = False
    stop: list[str] = field(default_factory=list)
    dropped: list[dict[str, str]] | None = None  # request fields the protocol dropped (ChatRequest.dropped)
    requested_max_tokens: int | None = None
    parsed: bool = True  # False: the request body was never parsed (no model, stream, stop in meta)


def call_meta(head: CallHead, n_prompt: int, **extra: Any) -> dict[str, Any]:
    """The meta every record of a call starts with."""
    meta: dict[str, Any] = {"rollout_key": head.rollout_key, "endpoint": head.endpoint,
                            "history_mode": head.history_mode, "n_prompt": n_prompt}
    if head.parsed:
        meta.update(model=head.model, stream=head.stream, stop=list(head.stop))
        if head.dropped:
            meta["dropped"] = head.dropped
    meta.update(extra)
    return meta


def sampling_meta(params: SamplingParams, used: Sampled, requested_max_tokens: int | None) -> dict[str, Any]:
    """meta["sampling"]: what the engine was asked, what the harness sent, which knobs were forced."""
    return {"temperature": params.temperature, "top_p": params.top_p, "max_tokens": params.max_tokens,
            "stop_token_ids": list(params.stop_token_ids), "requested_max_tokens": requested_max_tokens,
            "sent": dict(used.sent), "forced": list(used.forced)}


def record_call(head: CallHead, *, prompt_ids: list[int], provenance: list[int], gen: Generation,
                params: SamplingParams, used: Sampled, request: Any, response: Any, timings: dict[str, float],
                delivered: bool, **extra: Any) -> CallRecord:
    """The record of a served call (status ok); `extra` goes into its meta."""
    meta = call_meta(head, len(prompt_ids), sampling=sampling_meta(params, used, head.requested_max_tokens),
                     timings=timings, n_reused=len(provenance) - provenance.count(PROMPT), **extra)
    return CallRecord(
        call_id=head.call_id, rollout_id=head.rollout_id, seq=head.seq, protocol=head.protocol,
        prompt_ids=list(prompt_ids), sampled_ids=list(gen.token_ids), logprobs=list(gen.logprobs),
        prompt_provenance=list(provenance), policy_version=gen.policy_version,
        temperature=params.temperature, top_p=params.top_p, finish_reason=gen.finish_reason,
        status="ok", t_start=head.t_start, t_end=time.time(), request=request, response=response,
        meta=meta, delivered=delivered)


def error_record(head: CallHead, *, n_prompt: int, used: Sampled, policy_version: int, request: Any,
                 response: Any, error: str, error_kind: str, delivered: bool, **extra: Any) -> CallRecord:
    """The record of a call answered with an error: no ids, the values it would have sampled with."""
    return CallRecord(
        call_id=head.call_id, rollout_id=head.rollout_id, seq=head.seq, protocol=head.protocol,
        prompt_ids=[], sampled_ids=[], logprobs=[], prompt_provenance=[], policy_version=int(policy_version),
        temperature=used.temperature, top_p=used.top_p, finish_reason="stop", status="error",
        t_start=head.t_start, t_end=time.time(), request=request, response=response,
        meta=call_meta(head, n_prompt, error=error, error_kind=error_kind, **extra), delivered=delivered)
