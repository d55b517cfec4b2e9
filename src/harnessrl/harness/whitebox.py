"""White-box AgentLoop: the `builtin` agent run inside the run process, with direct token access.

`harness: whitebox` runs the same agent as `builtin` (harness/builtin_agent.py: its system prompt,
worked examples, one ```bash block per reply, the same observation text and stop rules), but the
loop lives in the runner's thread instead of a process in the sandbox:

    messages -> ProxyServer.call(key, request)        (in this process: no HTTP, no sockets)
             -> the proxy's call path, as every HTTP route takes it (proxy/calls.py CallHandler:
                render with exact history, sampling policy, length check, generate, commit, record:
                durable before the next turn)
             -> reply text -> its bash block -> sandbox.run (bwrap)

It calls the proxy the runner registered the rollout with (rollout id, seq counter, Conversation),
so its records are the ones `builtin` leaves through the proxy: the
same prompt ids, sampled ids, provenance and sampling parameters for the same replies (a test
checks it). Trees, advantages and the trainer read them unchanged. This is the white-box baseline
of verl's AgentLoop: what a trainer that owns the agent loop sees, against black-box harnesses.

Departures from `builtin` through the proxy: commands run with the sandbox's base environment
(not the launcher's private HOME/TMPDIR), records carry `protocol="whitebox"` and are delivered
by construction; only the bash format (no native tool calls); no replayed branches.
"""

from __future__ import annotations

import asyncio
import time
import json
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict

from harnessrl.harness import builtin_agent as agent
from harnessrl.harness.base import HarnessAdapter, HarnessConfigError, HarnessResult, SandboxLike
from harnessrl.harness.profiles import Profile, profile_table, resolve
from harnessrl.engine.knobs import Sent, knob_error
from harnessrl.render.messages import Role

PROFILES = profile_table(Profile("full", "the builtin agent's loop in the run process (text mode, direct token ids)"))
COMMAND_TIMEOUT_S = 60.0  # builtin_agent.run_shell's limit per command


class TextTurn(TypedDict):
    """One message of the text-format loop, as builtin_agent sends it."""

    role: Role
    content: str


class InProcessProxy(Protocol):
    """What the loop needs from the run's in-process proxy (proxy/server.py ProxyServer): its one
    call method, and whether a key replays a parent's calls."""

    async def call(self, key: str, request: dict[str, Any]) -> Any: ...

    def is_replaying(self, key: str) -> bool: ...


def in_process_proxy(link: Any) -> InProcessProxy:
    """The in-process proxy behind the runner's link (rollout/proxy_link.py `in_process()`); a proxy
    in another process cannot serve the loop."""
    proxy: InProcessProxy | None = link.in_process()
    if proxy is None:
        raise HarnessConfigError("the whitebox harness runs the agent inside this process and needs the "
                                 "in-process proxy: drop --proxy (a proxy in another process has no engine here)")
    return proxy


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

    def __init__(self, temperature: float | None = None, max_tokens: int = agent.REPLY_TOKENS, profile: str | None = None) -> None:
        # what the agent sends with every call (builtin_agent's request), checked as a request is
        self.sent = Sent(temperature=None if temperature is None else float(temperature), max_tokens=int(max_tokens))
        bad = knob_error(self.sent)
        if bad is not None:
            raise HarnessConfigError(f"whitebox: {bad[0]}, got temperature {temperature}, max_tokens {max_tokens}")
        self.profile = resolve(self.name, PROFILES, profile, self.default_profile)
        self.proxy: InProcessProxy | None = None

    def bind_proxy(self, link: Any) -> None:
        """Call the runner's in-process proxy (its `call` method: the HTTP routes' call path)."""
        self.proxy = in_process_proxy(link)

    def run(self, sandbox: SandboxLike, *, instruction: str, proxy_base: str, api_key: str, model: str,
            timeout_s: float, max_turns: int, workdir: str | None = None) -> HarnessResult:
        if self.proxy is None:
            raise HarnessConfigError("the whitebox harness is not bound to a proxy (the runner calls bind_proxy)")
        try:
            replaying = self.proxy.is_replaying(api_key)
        except KeyError:
            return HarnessResult("harness_error", 1, "", 0.0, error="whitebox: the rollout key is not registered")
        if replaying:
            return HarnessResult("harness_error", 1, "", 0.0, error="whitebox: replayed branches are not supported")
        t0 = time.monotonic()
        loop = asyncio.new_event_loop()
        try:
            stats = run_loop(self.proxy, api_key, loop, sandbox, instruction, model, max_turns=max_turns,
                             deadline=t0 + timeout_s, sent=self.sent, workdir=workdir)
        finally:
            loop.close()
        elapsed = time.monotonic() - t0
        if stats.stop == "timeout":
            return HarnessResult("timeout", None, stats.final_message, elapsed, meta=stats.meta(),
                                 error=f"harness did not finish within {timeout_s:.0f}s")
        return HarnessResult("ok", 0, stats.final_message, elapsed, meta=stats.meta())


def run_loop(proxy: InProcessProxy, key: str, loop: asyncio.AbstractEventLoop, sandbox: SandboxLike, task: str,
             model: str, *, max_turns: int, deadline: float, sent: Sent, workdir: str | None) -> LoopStats:
    """builtin_agent.run (bash format) with the proxy called in-process."""
    messages: list[TextTurn] = agent.first_messages("bash", task)
    stats = LoopStats()
    while stats.turns < max_turns:
        if time.monotonic() >= deadline:
            stats.stop = "timeout"
            break
        reply = model_call(proxy, key, loop, messages, model, sent, stats)
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


def model_call(proxy: InProcessProxy, key: str, loop: asyncio.AbstractEventLoop, messages: list[TextTurn],
               model: str, sent: Sent, stats: LoopStats) -> str | None:
    """One call, builtin_agent's request through the proxy's call path (ProxyServer.call). The
    reply's text, or None when refused (the conversation no longer fits the context, or any other
    error answer: builtin's "rejected")."""
    temperature = {} if sent.temperature is None else {"temperature": sent.temperature}  # builtin_agent's request
    request = {"model": model, "messages": [dict(m) for m in messages], **temperature, "max_tokens": sent.max_tokens}
    reply = loop.run_until_complete(proxy.call(key, request))
    if reply.status != 200:
        return None
    timings = reply.timings or {}
    stats.times["render_s"] += timings.get("render_s", 0.0) + timings.get("respond_s", 0.0)  # + commit and parse
    stats.times["engine_s"] += timings.get("engine_s", 0.0)
    content = json.loads(reply.body)["choices"][0]["message"]["content"]
    return str(content or "")
