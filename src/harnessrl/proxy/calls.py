"""One model call, protocol-neutral: parse -> render (exact history) -> generate -> parse reply ->
commit to the store -> response bytes. Every outcome, failures included, is stored; the record
is durable before the response is handed back to the HTTP layer; a streamed answer sends its events
as the engine samples and queues its last one only once the call is durable.

Disk bound: an error call stores at most `ERROR_REQUEST_LIMIT` bytes of its request, and each
rollout has a byte quota (request + response bytes of its calls, over all its keys); once it is
spent, calls get a 413 `quota` error: the first one is recorded, later ones are answered without
a record. Each record keeps what it charged (`meta["quota_bytes"]`), so the quota survives a
restart of the proxy on the same run directory (rollouts.py loads it from the store)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from harnessrl.engine.base import (Engine, EngineOverloaded, Generation, PromptTooLong, SamplingParams, StreamItem,
                                   stream_generation)
from harnessrl.proxy.call_record import CallHead, error_record, record_call
from harnessrl.proxy.canonical import CallResult, ChatRequest
from harnessrl.proxy.errors import ProxyError, bad_request, call_budget_spent, internal, overloaded, quota_spent
from harnessrl.proxy.jsonutil import MAX_JSON_DEPTH, DecodeError, TooDeep, dumps, loads_bounded
from harnessrl.proxy.replay import ReplayHit
from harnessrl.proxy.rollouts import RolloutState
from harnessrl.proxy.sse import StreamedBody
from harnessrl.engine.knobs import NOT_SENT, knob_error
from harnessrl.proxy.serving import Sampled, ServingPolicy, sampling_params, stop_cut
from harnessrl.proxy.stream_text import ReplyStream
from harnessrl.proxy.wire import WireProtocol
from harnessrl.proxy.writer import CallWriter
from harnessrl.render.messages import ParsedCompletion

if TYPE_CHECKING:
    from harnessrl.render.conversation import Conversation
    from harnessrl.render.turns import RenderedPrompt

log = logging.getLogger(__name__)
T = TypeVar("T")
ERROR_REQUEST_LIMIT = 65536  # bytes of a failed call's request body kept in its record
DEFAULT_ROLLOUT_QUOTA = 256 * 1024 * 1024  # bytes of request + response a rollout key may store
# Bodies above this size are decoded (JSON, schema) and rendered in a worker thread, so the event
# loop keeps serving other rollouts meanwhile; the renderer tokenises big texts through a call that
# releases the GIL (Renderer.encode), so that work runs on another core. A key with work in a
# worker thread sends all its work there: its Conversation is locked meanwhile, and waiting for
# that lock on the event loop would stall every rollout.
_THREAD_RENDER_BYTES = 16384


@dataclass
class Reply:
    status: int
    body: bytes
    media_type: str = "application/json"
    error: ProxyError | None = None  # set on error replies (its headers, its in-stream form)
    call_id: str | None = None  # the stored call this answers (marked delivered once it is sent)
    stream: StreamedBody | None = None  # a streamed answer: its events, sent as they are made (body unused)
    timings: dict[str, float] | None = None  # a stored reply's phases (render_s, engine_s, ...), as recorded

    @property
    def headers(self) -> dict[str, str]:
        return self.error.headers() if self.error is not None else {}


@dataclass
class _Job:
    """A call rendered and ready for the engine."""

    req: ChatRequest
    conversation: Conversation
    rendered: RenderedPrompt
    prompt_ids: list[int]
    used: Sampled
    params: SamplingParams
    hit: ReplayHit | None
    t_render: float
    t_engine: float
    first_token_s: float | None = None  # a streamed call: seconds from the engine request to its first token


@dataclass
class _Call:
    """What is known about a call so far (for its store record, success or failure)."""

    protocol: WireProtocol
    rollout: RolloutState
    endpoint: str
    call_id: str
    seq: int
    t_start: float
    raw: bytes = b""
    request: Any = None
    req: ChatRequest | None = None
    n_prompt: int = 0
    timings: dict[str, float] | None = None  # set once the reply is stored


class CallHandler:
    def __init__(self, engine: Engine, writer: CallWriter, policy: ServingPolicy,
                 stop_ids: tuple[int, ...] = (), tokenizer: Any = None, history_mode: str = "exact",
                 served_model: str = "policy", rollout_quota: int = DEFAULT_ROLLOUT_QUOTA):
        self.engine = engine
        # the serving values of requests that send none, the cap on one reply and the forced knobs,
        # as `vllm serve --override-generation-config '{"temperature": ...}'` would (serving.py)
        self.policy = policy
        self.rollout_quota = rollout_quota
        self.served_model = served_model
        self.writer = writer
        self.stop_ids = tuple(stop_ids)
        self.tokenizer = tokenizer
        self.history_mode = history_mode
        self._stop_cache: dict[str, int | None] = {}
        self._id_prefix = secrets.token_hex(6)  # call ids: random per server + a counter (no syscall per call)
        self._id_counter = itertools.count()

    async def handle(self, protocol: WireProtocol, rollout: RolloutState, body: bytes, endpoint: str) -> Reply:
        if rollout.usage.stored_bytes >= self.rollout_quota:
            return await self._refuse_over_quota(protocol, rollout, endpoint)
        if not rollout.admit():
            return await self._refuse_over_budget(protocol, rollout, endpoint, body)
        call_id = f"{self._id_prefix}{next(self._id_counter):010x}"
        call = _Call(protocol, rollout, endpoint, call_id, rollout.take_seq(), time.time(), raw=body)
        try:
            return await self._run(call, body)
        except Exception as e:  # a bug must not take the server down; the client sees a 500
            return await self._fail(call, self._proxy_error(call, e))

    @staticmethod
    def _proxy_error(call: _Call, e: Exception) -> ProxyError:
        """What a call that raised `e` answers (a bug: a 500, logged)."""
        if isinstance(e, ProxyError):
            return e
        if isinstance(e, EngineOverloaded):
            return overloaded()
        if isinstance(e, PromptTooLong):
            return call.protocol.too_long(e.prompt_tokens, e.max_model_len)
        log.exception("call %s failed", call.call_id, exc_info=e)
        return internal(f"proxy error: {type(e).__name__}: {e}")

    async def reject(self, protocol: WireProtocol, rollout: RolloutState, endpoint: str, err: ProxyError,
                     body_bytes: int | None = None) -> Reply:
        """Answer and record a call refused before its body was parsed (413 too large, 408
        timeout; with `body_bytes`: a body read, then refused unparsed, e.g. too many large
        requests in flight)."""
        if rollout.usage.stored_bytes >= self.rollout_quota:
            return await self._refuse_over_quota(protocol, rollout, endpoint)
        call_id = f"{self._id_prefix}{next(self._id_counter):010x}"
        call = _Call(protocol, rollout, endpoint, call_id, rollout.take_seq(), time.time())
        call.request = ({"_unparsed": "(body not read)"} if body_bytes is None
                        else {"_unparsed": f"(not parsed: {err.kind})", "_bytes": body_bytes})
        return await self._fail(call, err)

    async def _refuse_over_quota(self, protocol: WireProtocol, rollout: RolloutState, endpoint: str) -> Reply:
        rollout.usage.refused_over_quota += 1
        return await self._refuse(protocol, rollout, endpoint, quota_spent(rollout.rollout_id, self.rollout_quota),
                                  rollout.usage.refused_over_quota == 1, {"_unparsed": "(not read: quota spent)"})

    async def _refuse_over_budget(self, protocol: WireProtocol, rollout: RolloutState, endpoint: str,
                                  body: bytes) -> Reply:
        """The key's call budget is spent: a typed 400. The first refusal is recorded (the runner reads
        it as the policy's end of the rollout, then scores the workspace); repeats are only answered."""
        with rollout.lock:
            first = rollout.admitted == (rollout.max_calls or 0)
            rollout.admitted += 1  # past the budget: counts the refusals
        return await self._refuse(protocol, rollout, endpoint, call_budget_spent(rollout.rollout_id, rollout.max_calls or 0),
                                  first, {"_unparsed": "(not read: call budget spent)", "_bytes": len(body)})

    async def _refuse(self, protocol: WireProtocol, rollout: RolloutState, endpoint: str, err: ProxyError,
                      record: bool, request: dict) -> Reply:
        """Answer a refused call; only the first refusal of a kind is recorded, so a flood of them
        cannot fill the disk either."""
        if not record:
            return Reply(protocol.error_status(err), dumps(protocol.error_body(err)), error=err)
        call = _Call(protocol, rollout, endpoint, f"{self._id_prefix}{next(self._id_counter):010x}",
                     rollout.take_seq(), time.time())
        call.request = request
        return await self._fail(call, err)

    async def count_tokens(self, protocol: WireProtocol, rollout: RolloutState, body: bytes) -> int:
        """Prompt length of a request as this rollout would render it (nothing is stored)."""
        def count() -> int:
            req = protocol.parse(_load(body))
            return len(self._prepare(rollout.conversation, req).ids)

        return await _run_for(rollout, self._off_loop(rollout, body), count)

    @staticmethod
    def _decode(call: _Call, body: bytes) -> ChatRequest:
        call.request = _load(body)
        call.req = call.protocol.parse(call.request)
        return call.req

    @staticmethod
    def _off_loop(rollout: RolloutState, body: bytes) -> bool:
        return len(body) > _THREAD_RENDER_BYTES or rollout.off_loop > 0

    async def _run(self, call: _Call, body: bytes) -> Reply:
        rollout = call.rollout
        offload = self._off_loop(rollout, body)  # big: JSON, schema and rendering off the event loop
        req = await _run_for(rollout, offload, self._decode, call, body)
        conversation = rollout.conversation  # one object from prepare to commit
        t_render = time.perf_counter()
        rendered = await _run_for(rollout, self._off_loop(rollout, body), self._prepare, conversation, req)
        prompt_ids = list(rendered.ids)
        call.n_prompt = len(prompt_ids)
        used = self._sampling(req)
        params = self._params(req, used, call.n_prompt, call.rollout.rollout_id)
        t_engine = time.perf_counter()
        hit = await self._replayed(rollout, prompt_ids)
        job = _Job(req, conversation, rendered, prompt_ids, used, params, hit, t_render, t_engine)
        if hit is not None and hit.call is not None:  # a branch's replayed call: the parent's answer again
            rec = hit.call
            gen = Generation(list(rec.sampled_ids), list(rec.logprobs), rec.finish_reason,  # type: ignore[arg-type]
                             rec.policy_version)
        elif req.stream:
            return await self._stream(call, body, job)
        else:
            gen = self._cut_at_stop(await self.engine.generate(prompt_ids, params), req.stop)

        def whole(result: CallResult, response: dict[str, Any]) -> bytes:
            return b"".join(call.protocol.stream(result, req)) if req.stream else dumps(response)

        out = await self._store(call, body, job, gen, whole)
        return Reply(200, out, "text/event-stream" if req.stream else "application/json", call_id=call.call_id,
                     timings=call.timings)

    async def _stream(self, call: _Call, body: bytes, job: _Job) -> Reply:
        """A streamed call: the reply's events go out as the engine samples (proxy/stream_text.py).
        Errors until the first sampled token are answered as usual; after it, the status line is
        sent and the rest runs in its own task, so the call completes and is stored even when the
        client goes away; its last event is queued only once the call is committed."""
        steps = stream_generation(self.engine, job.prompt_ids, job.params)
        try:
            first = await anext(steps)
        except BaseException:
            await steps.aclose()
            raise
        job.first_token_s = time.perf_counter() - job.t_engine
        head = CallResult(call.call_id, job.req.model or self.served_model, int(call.t_start),
                          ParsedCompletion("", None, [], "stop"), call.n_prompt, 0, "stop")
        stream = StreamedBody()
        stream.done = asyncio.ensure_future(self._produce(call, body, job, steps, first, head, stream))
        return Reply(200, b"", "text/event-stream", call_id=call.call_id, stream=stream)

    async def _produce(self, call: _Call, body: bytes, job: _Job, steps: AsyncGenerator[StreamItem, None],
                       first: StreamItem, head: CallResult, stream: StreamedBody) -> None:
        encoder = call.protocol.stream_encoder(head, job.req)
        text = ReplyStream(job.conversation.renderer, list(job.rendered.tools), job.req.stop)
        try:
            stream.put(encoder.open())
            item = first
            while not isinstance(item, Generation):
                stream.put([e for channel, piece in text.feed(item.token_ids) for e in encoder.delta(channel, piece)])
                item = await anext(steps)
            gen = self._cut_at_stop(item, job.req.stop)

            def rest(result: CallResult, response: dict[str, Any]) -> bytes:
                return b"".join(encoder.close(result, text.rest(result.completion)))

            stream.put([await self._store(call, body, job, gen, rest, streamed=stream.sent)])
        except Exception as e:  # after the first token: stored as a failed call, sent as an in-stream error
            err = self._proxy_error(call, e)
            await self._fail(call, err)
            stream.put([call.protocol.stream_error(err)])
        finally:
            await steps.aclose()
            stream.end()

    async def _store(self, call: _Call, body: bytes, job: _Job, gen: Generation,
                     out_of: Callable[[CallResult, dict[str, Any]], bytes], streamed: int = 0) -> bytes:
        """Commit the reply to the conversation and the call to the store; the bytes still to send
        (`out_of(result, response)`; `streamed`: bytes of the answer already sent)."""
        req, rollout = job.req, call.rollout
        t_parse = time.perf_counter()
        completion = await _run_for(rollout, rollout.off_loop > 0, job.conversation.commit, job.rendered,
                                    list(gen.token_ids), gen.policy_version, gen.finish_reason, req.stop)
        result = CallResult(call.call_id, req.model or self.served_model, int(call.t_start), completion, call.n_prompt,
                            len(gen.token_ids), gen.finish_reason)
        response = call.protocol.respond(result, req)
        out = out_of(result, response)
        charged = len(body) + streamed + len(out)
        rollout.usage.stored_bytes += charged
        t_done = time.perf_counter()
        timings = {"render_s": job.t_engine - job.t_render, "engine_s": t_parse - job.t_engine,
                   "respond_s": t_done - t_parse, **{f"engine_{k}": v for k, v in (gen.timings or {}).items()}}
        if job.first_token_s is not None:
            timings["first_token_s"] = job.first_token_s
        call.timings = timings
        extra: dict[str, Any] = {"quota_bytes": charged}
        hit = job.hit
        if hit is not None:
            extra["replay"] = ({"of": hit.call.call_id, "match": hit.match} if hit.call is not None
                               else {"diverged": True, "expected": hit.expected})
        # delivered: False until its last byte is handed to the open connection (app.py)
        record = record_call(self._head(call), prompt_ids=job.prompt_ids, provenance=list(job.rendered.provenance),
                             gen=gen, params=job.params, used=job.used, request=call.request, response=response,
                             timings=timings, delivered=False, **extra)
        await self.writer.write(record)
        return out

    async def _replayed(self, rollout: RolloutState, prompt_ids: list[int]) -> ReplayHit | None:
        """The recorded answer of a branch's call (proxy/replay.py), None when the key replays
        nothing (any more). Matching may decode long prompts: off the event loop then."""
        script = rollout.replay
        if script is None or not script.pending:
            return None
        decode = None if self.tokenizer is None else self._decode_ids
        if len(prompt_ids) > 2048:
            return await asyncio.to_thread(script.take, prompt_ids, decode)
        return script.take(prompt_ids, decode)

    def _decode_ids(self, ids: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(ids), skip_special_tokens=False))

    def _prepare(self, conversation: Conversation, req: ChatRequest) -> RenderedPrompt:
        try:
            return conversation.prepare(req.messages, req.tools)
        except ValueError as e:  # TemplateError and other rendering refusals
            raise bad_request(f"cannot render the conversation: {e}") from None

    def _sampling(self, req: ChatRequest) -> Sampled:
        """The values the call samples with (the serving policy applied to what the harness sent).
        A prompt with no room left for one token is the protocol's "too long" (`_params`)."""
        bad = knob_error(req)
        if bad is not None:
            raise bad_request(*bad)
        return self.policy.resolve(req)

    def _params(self, req: ChatRequest, used: Sampled, n_prompt: int, route_key: str) -> SamplingParams:
        stops = self.stop_ids + tuple(i for i in (self._stop_id(s) for s in req.stop) if i is not None)
        return sampling_params(used, n_prompt, self.engine.max_model_len, stops, route_key)

    def _cut_at_stop(self, gen: Generation, stops: list[str]) -> Generation:
        """The generation cut where the first stop string completes (serving.py: the stop rule)."""
        if not stops or self.tokenizer is None:
            return gen
        keep = stop_cut(gen.token_ids, stops, self._decode_ids)
        if keep is None or (keep == len(gen.token_ids) and gen.finish_reason == "stop"):
            return gen
        return replace(gen, token_ids=list(gen.token_ids[:keep]), logprobs=list(gen.logprobs[:keep]),
                       finish_reason="stop")

    def _stop_id(self, text: str) -> int | None:
        """A stop sequence that is exactly one token is also a stop id (the engine ends there; the
        text rule of `_cut_at_stop` holds for every stop string)."""
        if text not in self._stop_cache:
            ids = self.tokenizer.encode(text, add_special_tokens=False) if self.tokenizer is not None else []
            self._stop_cache[text] = ids[0] if len(ids) == 1 else None
        return self._stop_cache[text]

    def _head(self, call: _Call) -> CallHead:
        req = call.req
        if req is None:
            return CallHead(call.call_id, call.rollout.rollout_id, call.rollout.key, call.seq, call.protocol.name,
                            call.endpoint, self.history_mode, call.t_start, parsed=False)
        return CallHead(call.call_id, call.rollout.rollout_id, call.rollout.key, call.seq, call.protocol.name,
                        call.endpoint, self.history_mode, call.t_start, model=req.model, stream=req.stream,
                        stop=list(req.stop), dropped=req.dropped, requested_max_tokens=req.max_tokens)

    async def _fail(self, call: _Call, err: ProxyError) -> Reply:
        body = call.protocol.error_body(err)
        request = call.request
        if len(call.raw) > ERROR_REQUEST_LIMIT:  # a big request that failed: keep its head and its size
            request = {"_truncated": call.raw[:ERROR_REQUEST_LIMIT].decode("utf-8", errors="replace"),
                       "_bytes": len(call.raw)}
        elif request is None:
            request = {"_unparsed": call.raw.decode("utf-8", errors="replace")}
        charged = min(len(call.raw), ERROR_REQUEST_LIMIT) + 512
        call.rollout.usage.stored_bytes += charged
        req = call.req
        used = self.policy.resolve(NOT_SENT if req is None else req)
        record = error_record(self._head(call), n_prompt=call.n_prompt, used=used,
                              policy_version=self.engine.policy_version, request=request, response=body,
                              error=err.message, error_kind=err.kind, delivered=False, quota_bytes=charged)
        try:
            await self.writer.write(record)
        except Exception:  # the store is failing: still answer the client
            log.exception("could not store failed call %s", call.call_id)
            return Reply(call.protocol.error_status(err), dumps(body), error=err)
        return Reply(call.protocol.error_status(err), dumps(body), error=err, call_id=call.call_id)


async def _run_for(rollout: RolloutState, off_loop: bool, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` for `rollout`: here, or in a worker thread (counted in `rollout.off_loop`)."""
    if not off_loop:
        return fn(*args)
    rollout.off_loop += 1
    try:
        return await asyncio.to_thread(fn, *args)
    finally:
        rollout.off_loop -= 1


def _load(body: bytes) -> Any:
    if not body.strip():
        raise bad_request("empty request body: send a JSON object")
    try:
        value = loads_bounded(body, MAX_JSON_DEPTH)
    except TooDeep as e:
        raise bad_request(f"invalid request: {e}") from None
    except (DecodeError, UnicodeDecodeError) as e:
        raise bad_request(f"malformed JSON body: {e}") from None
    if not isinstance(value, dict):
        raise bad_request("the request body must be a JSON object")
    return value
