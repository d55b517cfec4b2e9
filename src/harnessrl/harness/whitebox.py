"""White-box AgentLoop: the `builtin` agent run inside the run process, with direct token access.

`harness: whitebox` runs the same agent as `builtin` (harness/builtin_agent.py: its system prompt,
worked examples, one ```bash block per reply, the same observation text and stop rules), but the
loop lives in the runner's thread instead of a process in the sandbox:

    messages -> Conversation.prepare (the proxy's renderer, exact history) -> prompt ids
             -> engine.generate(prompt ids)                                  (no HTTP, no JSON)
             -> Conversation.commit -> reply text -> its bash block -> sandbox.run (bwrap)
             -> CallRecord into the run store (the proxy's writer: durable before the next turn)

The sampling values come from the proxy's ServingPolicy (proxy/serving.py) and the record from the
proxy's `record_call` (proxy/call_record.py), so both paths sample and record one way.

It reuses the per-rollout state the runner registered with the in-process proxy (rollout id,
seq counter, Conversation), so its records are the ones `builtin` leaves through the proxy: the
same prompt ids, sampled ids, provenance and sampling parameters for the same replies (a test
checks it). Trees, advantages and the trainer read them unchanged. This is the white-box baseline
of verl's AgentLoop: what a trainer that owns the agent loop sees, against black-box harnesses.

Departures from `builtin` through the proxy: commands run with the sandbox's base environment
(not the launcher's private HOME/TMPDIR), records carry `protocol="whitebox"` and are delivered
by construction; only the text format (no native tool calls); no replayed branches.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, TypedDict

from harnessrl.engine.base import Generation, PromptTooLong
from harnessrl.harness import builtin_agent as agent
from harnessrl.harness.base import HarnessAdapter, HarnessConfigError, HarnessResult, SandboxLike
from harnessrl.harness.profiles import Profile, profile_table, resolve
from harnessrl.proxy.call_record import CallHead, error_record, record_call
from harnessrl.proxy.serving import Sampled, ServingPolicy, sampling_params, sent_error
from harnessrl.render.messages import Message, Role

PROFILES = profile_table(Profile("full", "the builtin agent's loop in the run process (text mode, direct token ids)"))
COMMAND_TIMEOUT_S = 60.0  # builtin_agent.run_shell's limit per command
PROTOCOL = "whitebox"


class TextTurn(TypedDict):
    """One message of the text-format loop, as builtin_agent sends it."""

    role: Role
    content: str


@dataclass(frozen=True)
class Policy:
    """What the loop needs from the run's in-process proxy: its engine, call writer, rollout
    registry (key -> rollout id, seq counter, Conversation) and serving policy (proxy/serving.py)."""

    engine: Any
    writer: Any  # proxy.writer.CallWriter
    registry: Any  # proxy.rollouts.RolloutRegistry
    stop_ids: tuple[int, ...]
    history_mode: str
    serving: ServingPolicy  # the proxy's own: the same for both paths


def policy_of(link: Any) -> Policy:
    """The Policy behind a LocalProxy (an in-process ProxyServer); a remote proxy cannot serve it."""
    server = getattr(link, "server", None)
    if server is None or getattr(server, "writer", None) is None:
        raise HarnessConfigError("the whitebox harness runs the agent inside this process and needs the "
                                 "in-process proxy: drop --proxy (a proxy in another process has no engine here)")
    return Policy(engine=server.engine, writer=server.writer, registry=server.registry,
                  stop_ids=tuple(getattr(server.renderer, "stop_ids", ()) or ()),
                  history_mode=server.history_mode, serving=server.policy)


@dataclass
class LoopStats:
    turns: int = 0
    commands: int = 0
    stop: str = "max_turns"
    final_message: str = ""
    times: dict[str, float] = field(default_factory=lambda: {"render_s": 0.0, "engine_s": 0.0, "command_s": 0.0})

    def meta(self) -> dict[str, Any]:
        return {"turns": self.turns, "commands": self.commands, "stop": self.stop,
                **{k: round(v, 4) for k, v in self.times.items()}}


class WhiteboxAdapter(HarnessAdapter):
    """The `whitebox` harness: `builtin`'s agent loop in this process (bound to the run's proxy by
    the runner, `bind_proxy`). Options: `temperature` (None, as builtin_agent: none is sent, the
    proxy's serve.default_temperature applies), `max_tokens` (builtin_agent's default)."""

    name = "whitebox"
    profiles = PROFILES
    default_profile = "full"
    profile: Profile

    def __init__(self, temperature: float | None = None, max_tokens: int = 256, profile: str | None = None) -> None:
        bad = sent_error(temperature, None, max_tokens)  # what the agent sends, checked as a request is
        if bad is not None:
            raise HarnessConfigError(f"whitebox: {bad[0]}, got temperature {temperature}, max_tokens {max_tokens}")
        self.profile = resolve(self.name, PROFILES, profile, self.default_profile)
        self.temperature = None if temperature is None else float(temperature)
        self.max_tokens = int(max_tokens)
        self.policy: Policy | None = None

    def bind_proxy(self, link: Any) -> None:
        """Take the engine, writer and rollout registry of the runner's in-process proxy."""
        self.policy = policy_of(link)

    def run(self, sandbox: SandboxLike, *, instruction: str, proxy_base: str, api_key: str, model: str,
            timeout_s: float, max_turns: int, workdir: str | None = None) -> HarnessResult:
        if self.policy is None:
            raise HarnessConfigError("the whitebox harness is not bound to a proxy (the runner calls bind_proxy)")
        state = self.policy.registry.get(api_key)
        if state is None:
            return HarnessResult("harness_error", 1, "", 0.0, error="whitebox: the rollout key is not registered")
        if getattr(state, "replay", None) is not None:
            return HarnessResult("harness_error", 1, "", 0.0, error="whitebox: replayed branches are not supported")
        t0 = time.monotonic()
        loop = asyncio.new_event_loop()
        try:
            stats = run_loop(self.policy, state, loop, sandbox, instruction, model, max_turns=max_turns,
                             deadline=t0 + timeout_s, temperature=self.temperature, max_tokens=self.max_tokens,
                             workdir=workdir)
        finally:
            loop.close()
        elapsed = time.monotonic() - t0
        if stats.stop == "timeout":
            return HarnessResult("timeout", None, stats.final_message, elapsed, meta=stats.meta(),
                                 error=f"harness did not finish within {timeout_s:.0f}s")
        return HarnessResult("ok", 0, stats.final_message, elapsed, meta=stats.meta())


def run_loop(policy: Policy, state: Any, loop: asyncio.AbstractEventLoop, sandbox: SandboxLike, task: str,
             model: str, *, max_turns: int, deadline: float, temperature: float | None, max_tokens: int,
             workdir: str | None) -> LoopStats:
    """builtin_agent.run (text format) with the engine called in-process."""
    messages: list[TextTurn] = agent.first_messages("text", task)
    stats = LoopStats()
    while stats.turns < max_turns:
        if time.monotonic() >= deadline:
            stats.stop = "timeout"
            break
        reply = model_call(policy, state, loop, messages, model, temperature, max_tokens, stats)
        if reply is None:  # refused (the conversation no longer fits the context): builtin's "rejected"
            stats.stop = "rejected"
            break
        stats.turns += 1
        stats.final_message = reply
        messages.append({"role": "assistant", "content": reply})
        match = agent.BASH_BLOCK.search(reply)
        if not match:
            stats.stop = agent.NO_BLOCK_FINAL
            break
        t = time.perf_counter()
        code, output = run_command(sandbox, match.group(1).strip(), max(1.0, min(COMMAND_TIMEOUT_S,
                                                                                 deadline - time.monotonic())), workdir)
        stats.times["command_s"] += time.perf_counter() - t
        stats.commands += 1
        messages.append({"role": "user", "content": agent.OBSERVATION.format(code=code, output=output)})
    return stats


def run_command(sandbox: SandboxLike, command: str, timeout_s: float, workdir: str | None) -> tuple[int, str]:
    """builtin_agent.run_shell, inside the sandbox: (exit code, clipped stdout + stderr)."""
    res = sandbox.run(["bash", "-c", command], cwd=workdir, timeout_s=timeout_s)
    if res.timed_out:
        return 124, f"command timed out after {timeout_s:.0f}s"
    out = res.stdout if isinstance(res.stdout, str) else res.stdout.decode("utf-8", errors="replace")
    err = res.stderr if isinstance(res.stderr, str) else res.stderr.decode("utf-8", errors="replace")
    return int(res.returncode or 0), agent.clip(out + err)


def model_call(policy: Policy, state: Any, loop: asyncio.AbstractEventLoop, messages: list[TextTurn],
               model: str, temperature: float | None, max_tokens: int, stats: LoopStats) -> str | None:
    """One call: render -> generate -> commit -> store. The reply's text, or None when refused."""
    seq, t_start = state.take_seq(), time.time()
    sent = {} if temperature is None else {"temperature": temperature}  # builtin_agent's request
    request = {"model": model, "messages": [dict(m) for m in messages], **sent, "max_tokens": max_tokens}
    head = CallHead(f"wb-{state.rollout_id}-{seq}", state.rollout_id, state.key, seq, PROTOCOL, PROTOCOL,
                    policy.history_mode, t_start, model=model, requested_max_tokens=max_tokens)
    used = policy.serving.resolve(temperature, None, max_tokens)
    conversation = state.conversation
    t_render = time.perf_counter()
    rendered = conversation.prepare([Message(m["role"], m["content"]) for m in messages], [])
    prompt_ids = list(rendered.ids)
    max_len = int(policy.engine.max_model_len)
    t_engine = time.perf_counter()
    stats.times["render_s"] += t_engine - t_render
    if len(prompt_ids) >= max_len:
        refuse(policy, head, used, loop, request, len(prompt_ids), max_len)
        return None
    params = sampling_params(used, len(prompt_ids), max_len, policy.stop_ids, state.rollout_id)
    try:
        gen: Generation = loop.run_until_complete(policy.engine.generate(prompt_ids, params))
    except PromptTooLong as e:
        refuse(policy, head, used, loop, request, e.prompt_tokens, e.max_model_len)
        return None
    t_parse = time.perf_counter()
    stats.times["engine_s"] += t_parse - t_engine
    parsed = conversation.commit(rendered, list(gen.token_ids), gen.policy_version, gen.finish_reason)
    stats.times["render_s"] += time.perf_counter() - t_parse
    response = {"choices": [{"index": 0, "message": {"role": "assistant", "content": parsed.content},
                             "finish_reason": parsed.finish_reason}]}
    timings = {"render_s": t_engine - t_render, "engine_s": t_parse - t_engine,
               **{f"engine_{k}": v for k, v in (gen.timings or {}).items()}}
    record = record_call(head, prompt_ids=prompt_ids, provenance=list(rendered.provenance), gen=gen, params=params,
                         used=used, request=request, response=response, timings=timings, delivered=True)
    loop.run_until_complete(policy.writer.write(record))
    return parsed.content or ""


def refuse(policy: Policy, head: CallHead, used: Sampled, loop: asyncio.AbstractEventLoop, request: dict[str, Any],
           n_prompt: int, max_len: int) -> None:
    """Store the "prompt too long" refusal the proxy would record (the runner reads it as
    context_exceeded)."""
    message = f"prompt is {n_prompt} tokens, the model context is {max_len}"
    record = error_record(head, n_prompt=n_prompt, used=used, policy_version=int(policy.engine.policy_version),
                          request=request, response={"error": {"message": message, "type": "invalid_request_error"}},
                          error=message, error_kind="too_long", delivered=True)
    loop.run_until_complete(policy.writer.write(record))
