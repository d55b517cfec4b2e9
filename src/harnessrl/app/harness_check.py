"""`harnessrl harness check SPEC`: one rollout of a harness against a scripted engine (no model
weights), then what the harness sent, call by call — protocol, tools, the shell tool the renderer
detects (docs/render.md), prompt tokens, how each call ended — and how the harness itself ended.
The first thing to run when bringing a new CLI agent through `command[...]:<template>`.

    report = check_harness("command[ro=/opt/qwen]:/opt/qwen/bin/qwen -p {task}", run_dir, sandbox="bwrap")
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHECK_TASK = "builtin:train"  # the task the check runs: the suite's first training task


@dataclass(frozen=True)
class CallSummary:
    seq: int
    protocol: str
    status: str  # ok | error
    prompt_tokens: int
    completion_tokens: int
    tools: list[str]
    shell_tool: str  # "" when the renderer finds none
    error: str = ""
    shell_kind: str = ""  # how the command goes in: string | argv | list ("" when none found)
    # when none is found among tools: the `shell_tool=NAME:ARG:KIND` options that could name one
    suggestions: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CheckReport:
    spec: str
    rollout_id: str
    status: str
    exit_code: int | None
    error: str
    final_message: str
    calls: list[CallSummary] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


def summarize_call(call: Any, shell_overrides: tuple[Any, ...] = ()) -> CallSummary:
    """One stored call as the check shows it (tools read back through the call's own protocol;
    `shell_overrides`: the shell tools the spec names, render/bash_format.py: ShellOverride)."""
    from harnessrl.proxy.protocols import WIRE_PROTOCOLS
    from harnessrl.render.bash_format import find_shell_tool, override_suggestions

    tools: list[Any] = []
    wire = next((w for w in WIRE_PROTOCOLS if w.name == call.protocol), None)
    if wire is not None and isinstance(call.request, dict) and "_unparsed" not in call.request:
        try:
            tools = wire.parse(call.request).tools
        except Exception:  # noqa: BLE001 - a request the proxy refused: shown without its tools
            tools = []
    shell = find_shell_tool(tools, shell_overrides)
    meta = call.meta or {}
    return CallSummary(seq=call.seq, protocol=call.protocol, status=call.status,
                       prompt_tokens=len(call.prompt_ids) or int(meta.get("n_prompt") or 0),
                       completion_tokens=len(call.sampled_ids), tools=[t.name for t in tools],
                       shell_tool=shell.name if shell else "", shell_kind=shell.kind if shell else "",
                       suggestions=[] if shell else [o.spec() for o in override_suggestions(tools)],
                       error=str(meta.get("error_kind") or "") + (": " + str(meta["error"])[:200] if meta.get("error") else ""))


def check_harness(spec: str, run_dir: Path, *, sandbox: str = "bwrap", options: dict[str, Any] | None = None,
                  timeout_s: float = 300.0, max_turns: int = 4) -> CheckReport:
    """Run `spec` once on the check task through an in-process proxy over the scripted engine
    (it answers every call with one fixed sentence) and report what the harness sent.
    Raises HarnessConfigError (bad option, missing binary or path) before anything starts."""
    from harnessrl.harness import check_harnesses
    from harnessrl.rollout.jobs import RolloutsFailed, run_groups
    from harnessrl.config import RunConfig
    from harnessrl.launch import local_proxy, shell_tools
    from harnessrl.sandbox.base import SandboxConfig
    from harnessrl.store import RunStore
    from harnessrl.tasks.loader import load_tasks

    opts = {spec: dict(options)} if options else {}
    check_harnesses([spec], opts)
    served = {spec: opts.get(spec, {})}
    shells = shell_tools(served)  # what the check's renderer drives, shown per call
    task = load_tasks(CHECK_TASK)[0]
    cfg = RunConfig()
    store = RunStore(run_dir)
    try:
        with local_proxy(cfg, store, scripted=True, served=served) as local:
            try:
                run_groups([task], [spec], 1, proxy=local, store=store, sandbox_cfg=SandboxConfig(type=sandbox),
                           concurrency=1, max_turns=max_turns, harness_timeout_s=timeout_s, start_retries=0,
                           harness_options=opts, split="check", progress=False)
            except RolloutsFailed:  # the harness never called the model: its record says why
                pass
        [record] = store.list_rollouts()
        calls = store.list_calls([record.rollout_id], include_raw=True)
    finally:
        store.close()
    meta = record.meta or {}
    return CheckReport(spec=spec, rollout_id=record.rollout_id, status=record.status,
                       exit_code=meta.get("exit_code"), error=record.error or "",
                       final_message=str(meta.get("final_message") or ""),
                       calls=[summarize_call(c, shells) for c in sorted(calls, key=lambda c: c.seq)])
