"""The job runner: every rollout of a list of group plans, K at a time, each in a fresh sandbox
with its own proxy key, scored by the task's verifier and written to the run store.

`harnessrl rollout` / `harnessrl eval` call `run_groups` (plan every task x harness, then run);
the training loop's collector calls `run_plans` with the plans of a step:

    records = run_groups(tasks, ["builtin"], n=8, proxy=server, store=store,
                         sandbox_cfg=SandboxConfig(type="bwrap"), concurrency=4, step=step)

One rollout: register key -> sandbox with the task's workspace (+ the harness's read-only paths) ->
harness run under a time limit -> verifier in a fresh sandbox on a copy of the workspace -> RolloutRecord.
Start failures (the sandbox cannot be created, or the harness fails before making any model call)
are retried up to `start_retries` times, then recorded as sandbox_error / harness_error. A retry
never mixes two attempts' calls in one rollout: only attempts that made no call are retried, each
attempt has a proxy key of its own, closed before the next one starts (a late request of a failed
attempt is refused), and the calls are counted again after that close. The rollout's record is its
final attempt; the earlier ones are kept apart in `meta["earlier_attempts"]` (status and error).
A workspace that passes a host-side limit when it is copied out to be scored (sandbox/treeops.py:
entries, depth, path length, bytes, time) is the policy's doing: `workspace_limit`, reward 0,
never retried (`meta["workspace_limit"]` names the limit). So is a forged reward, whatever way
the harness ended: `workspace_link` (a link into the verifier's files or out of the workspace,
`meta["workspace_link"]`) and `reward_forged` (a Harbor reward file written by another process,
locked or not a regular file, `meta["reward_forged"]`), both 0 (tasks/verifier.py).
Once the policy has sampled a call, every end is scored by the verifier (a crash, a timeout, a
context overflow, its own sandbox killed: 0 when nothing is left to score); the status still says
how the harness ended. A rollout with any model call refused as too long for the model's context
(the proxy's typed "prompt too long" error) is recorded as `context_exceeded`, also when the harness
went on after it (a summariser call that was served): never as `ok`.
Every record carries the harness profile it ran with (`profile`, and its settings in meta).
A rollout starts only while the machine has `memory_reserve_gib` available or none of its batch
runs (`memory_gate.py`); the time it was held is `durations["memory_wait_s"]`.
With `warm` > 0, a background thread makes the sandboxes of the next rollouts ahead of need (a
warm pool, sandbox/pool.py; issue 43 item 4): each is a fresh sandbox with its task's workspace and
its own, already registered proxy key, taken by exactly one rollout's first attempt and never reused
(retries make their own); the ones not taken are destroyed and their keys closed when the batch ends.
Such a rollout's `durations["sandbox_s"]` is the wait for it (`meta["warm_sandbox"]` is true).
"""

from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Sequence

from harnessrl.errors import HarnessRLError
from harnessrl.plain_progress import PlainProgress
from harnessrl.rollout.branching import branch_lineage
from harnessrl.rollout.memory_gate import MemoryGate
from harnessrl.rollout.plan import GroupPlan, RolloutJob, next_attempt, plan_cross
from harnessrl.rollout.proxy_link import as_proxy_link
from harnessrl.rollout.sample_check import SampleCheck
from harnessrl.store.call_classes import classify_calls
from harnessrl.store.records import Lineage, RolloutRecord
from harnessrl.tasks.model import Task
from harnessrl.rollout.task_sandbox import open_task_sandbox
from harnessrl.sandbox.treeops import WorkspaceLimitExceeded
from harnessrl.tasks.verifier import FORGERY_STATUSES, run_verifier

if TYPE_CHECKING:
    from harnessrl.harness.base import HarnessAdapter, HarnessResult
    from harnessrl.proxy.server import ProxyServer
    from harnessrl.rollout.proxy_link import ProxyLink
    from harnessrl.sandbox.base import Sandbox, SandboxConfig
    from harnessrl.store.run_store import RunStore

__all__ = ["RolloutJob", "RolloutsFailed", "RunOptions", "make_adapters", "run_groups", "run_plans", "run_rollout"]

FINAL_MESSAGE_CHARS = 2000

OnDone = Callable[[RolloutRecord], None]  # called once per finished rollout


@dataclass(frozen=True)
class RunOptions:
    """Per-rollout limits and identity shared by the rollouts of one run (`step` is the plan's)."""

    sandbox_cfg: SandboxConfig | None = None  # None = the default (bwrap)
    model: str = ""  # model name the harness sends ("" = the proxy's served name)
    max_turns: int = 8
    harness_timeout_s: float = 600.0
    verifier_timeout_s: float | None = None  # None = the task's own limit
    start_retries: int = 2
    step: int = 0
    harness_options: dict[str, dict[str, Any]] = field(default_factory=dict)  # spec -> make_harness kwargs
    memory_reserve_gib: float = 1.0  # hold new rollouts while less is available (0: off; memory_gate.py)
    live: "LiveSandboxes | None" = None  # set by run_plans: lets an interrupt end the running harnesses
    gate: "MemoryGate | None" = None  # set by run_plans: admission by free memory
    preflight: bool = True  # run_plans first checks that the host can run a sandbox (sandbox/health.py)
    warm: int = 0  # sandboxes made ahead of need (a warm pool, sandbox/pool.py); 0: each when its rollout starts
    pool: "WarmStarts | None" = None  # set by run_plans when warm > 0


def run_groups(tasks: list[Task], harness_specs: list[str], n: int, *, proxy: ProxyServer | ProxyLink, store: RunStore,
               sandbox_cfg: SandboxConfig | None = None, concurrency: int = 4, step: int = 0, model: str = "",
               max_turns: int = 8, harness_timeout_s: float = 600.0, start_retries: int = 2,
               harness_options: dict[str, dict[str, Any]] | None = None, split: str = "rollout",
               progress: bool = True, progress_every_s: float = 30.0) -> list[RolloutRecord]:
    """Plan every task x harness (n rollouts each, ids from `plan_cross` under the store's next
    attempt), run them and return their RolloutRecords (also written to `store`), in plan order.

    proxy: a started harnessrl.proxy.ProxyServer or a rollout.proxy_link.RemoteProxy.
    store: a harnessrl.store.RunStore (records are put as they finish).
    """
    opts = RunOptions(sandbox_cfg=sandbox_cfg, model=model, max_turns=max_turns,
                      harness_timeout_s=harness_timeout_s, start_retries=start_retries, step=step,
                      harness_options=harness_options or {})
    plans = plan_cross(tasks, harness_specs, n, step=step, attempt=next_attempt(store), split=split)
    with _progress(sum(p.n for p in plans), progress, progress_every_s) as on_done:
        records = run_plans(plans, proxy=proxy, store=store, opts=opts, concurrency=concurrency, on_done=on_done)
    SampleCheck(_warn).check(store, [(p.group_id, [j.rollout_id for j in p.jobs()]) for p in plans])
    return records


def _warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def run_plans(plans: Sequence[GroupPlan], *, proxy: ProxyServer | ProxyLink, store: RunStore, opts: RunOptions,
              adapters: dict[str, HarnessAdapter] | None = None, concurrency: int = 4,
              on_done: OnDone | None = None) -> list[RolloutRecord]:
    """Every rollout of the plans (plan order, then sample order); each rollout is stored with its
    plan's step. `adapters` (spec -> harness adapter) are made from `opts.harness_options` if absent."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    if opts.preflight:
        from harnessrl.sandbox.health import preflight

        preflight(opts.sandbox_cfg)  # HostUnfit names a broken host
    from harnessrl.sandbox.base import SandboxConfig
    from harnessrl.sandbox.health import fit_concurrency  # memory limits that add up (one log line when lowered)

    link = as_proxy_link(proxy)
    adapters = adapters if adapters is not None else make_adapters({p.harness for p in plans},
                                                                    opts.harness_options)
    limits = [sandbox_config_for(opts.sandbox_cfg or SandboxConfig(), a).memory_mb for a in adapters.values()]
    concurrency = fit_concurrency(concurrency, max((m for m in limits if m), default=None))
    for adapter in adapters.values():  # in-process agent loops (harness/whitebox.py) take the proxy's engine
        adapter.bind_proxy(link)
    work = [(job, replace(opts, step=p.step)) for p in plans for job in p.jobs()]
    results: dict[int, RolloutRecord] = {}
    live = LiveSandboxes()
    gate = MemoryGate(opts.memory_reserve_gib * 1024)
    warm = WarmStarts(work, adapters, link, opts.warm) if opts.warm > 0 and work else None
    pool = ThreadPoolExecutor(max_workers=concurrency)
    try:
        futures = {pool.submit(run_rollout, job, adapters[job.harness_spec], link, store,
                               replace(o, live=live, gate=gate, pool=warm)): i
                   for i, (job, o) in enumerate(work)}
        for fut in as_completed(futures):
            record = fut.result()
            results[futures[fut]] = record
            if on_done is not None:
                on_done(record)
    except BaseException:  # Ctrl-C / SIGTERM (KeyboardInterrupt) or a failing callback: end the rollouts now
        pool.shutdown(wait=False, cancel_futures=True)  # rollouts not started yet never start
        live.cancel()  # the running ones: their harnesses end with their sandboxes
        pool.shutdown(wait=True)
        raise
    finally:
        if warm is not None:  # what was made and not taken: destroyed, keys closed
            warm.close()
    pool.shutdown(wait=True)
    records = [results[i] for i in range(len(work))]
    check_not_all_broken(records)
    return records


class RolloutsFailed(HarnessRLError, RuntimeError):
    """Every rollout of a batch failed before its harness called the model: the setup is broken
    (a harness not installed, a sandbox that cannot start), so there is nothing to score or train on."""


START_STATUSES = ("harness_error", "sandbox_error")


def check_not_all_broken(records: Sequence[RolloutRecord]) -> None:
    """Raise RolloutsFailed when every record failed to start (no model call); the records are stored."""
    if not records or any(r.status not in START_STATUSES or r.call_count for r in records):
        return
    from harnessrl.harness import start_hint

    first = records[0].error or records[0].status
    raise RolloutsFailed(
        f"all {len(records)} rollouts failed before the model was called ({records[0].harness}: "
        f"{first[-400:].strip()}). The records are stored in the run. Fix: {start_hint(records[0].harness)}; "
        "then the sandbox (`harnessrl rollout --sandbox local` to compare).")


class WarmStart(NamedTuple):
    """A rollout's sandbox made ahead of need, with the proxy key it was made for."""

    key: str
    sandbox: Sandbox


class WarmStarts:
    """The warm pool of one `run_plans` call: job i's sandbox (task workspace, its own registered
    key) is made by the pool's thread at most `depth` rollouts ahead; `take` hands it to that job's
    first attempt, once. Closing destroys the rest and closes their keys."""

    def __init__(self, work: Sequence[tuple[RolloutJob, RunOptions]], adapters: dict[str, HarnessAdapter],
                 link: ProxyLink, depth: int) -> None:
        from harnessrl.sandbox.pool import WarmPool

        self.link = link
        self.index = {job.rollout_id: i for i, (job, _) in enumerate(work)}
        makers = [self._maker(job, adapters[job.harness_spec], o) for job, o in work]
        self.pool: WarmPool[WarmStart] = WarmPool(makers, depth, self._discard)

    def _maker(self, job: RolloutJob, adapter: HarnessAdapter, opts: RunOptions) -> Callable[[], WarmStart]:
        def make() -> WarmStart:
            from harnessrl.sandbox.base import ProxyEndpoint

            key = register_key(self.link, job, adapter, opts)
            try:
                cfg = sandbox_config_for(opts.sandbox_cfg, adapter)
                return WarmStart(key, open_task_sandbox(job.task, cfg, proxy=ProxyEndpoint(port=self.link.port, key=key)))
            except BaseException:
                self.link.close(key)
                raise

        return make

    def _discard(self, warm: WarmStart) -> None:
        try:
            warm.sandbox.destroy()
        finally:
            self.link.close(warm.key)

    def take(self, rollout_id: str) -> WarmStart | None:
        i = self.index.get(rollout_id)
        return None if i is None else self.pool.take(i)

    def close(self) -> None:
        self.pool.close()


class LiveSandboxes:
    """The open sandboxes of one `run_plans` call. `cancel()` destroys them (which ends the harness
    processes inside) and refuses new ones, so an interrupted run stops within seconds instead of
    waiting out every running rollout's time limit. Thread-safe; one per call, never shared."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: set[Sandbox] = set()
        self.cancelled = False

    def enter(self, sandbox: Sandbox) -> bool:
        """Track `sandbox`; False (and nothing tracked) once the run is cancelled."""
        with self._lock:
            if not self.cancelled:
                self._open.add(sandbox)
            return not self.cancelled

    def leave(self, sandbox: Sandbox) -> None:
        with self._lock:
            self._open.discard(sandbox)

    def cancel(self) -> None:
        with self._lock:
            self.cancelled, doomed = True, list(self._open)
        for sandbox in doomed:
            try:
                sandbox.destroy()  # idempotent; the owning thread's own destroy() then does nothing
            except Exception:  # noqa: BLE001 - best effort: the next sandbox must still be ended
                pass


def make_adapters(specs: set[str], options: dict[str, dict[str, Any]]) -> dict[str, HarnessAdapter]:
    """One harness adapter per spec (`options`: spec -> make_harness kwargs)."""
    from harnessrl.harness import make_harness

    return {spec: make_harness(spec, **options.get(spec, {})) for spec in specs}


def run_rollout(job: RolloutJob, adapter: HarnessAdapter, link: ProxyLink, store: RunStore,
                opts: RunOptions) -> RolloutRecord:
    """One rollout, start to record; never raises (every failure becomes a status)."""
    t0 = time.monotonic()
    profile = adapter.describe()  # the harness profile it runs with ({} without one)
    base = RolloutRecord(rollout_id=job.rollout_id, task_id=job.task.id, harness=job.harness_spec,
                         group_id=job.group_id, status="sandbox_error", reward=None, step=opts.step,
                         sample_idx=job.sample_idx, category=job.task.category, split=job.task.split,
                         profile=str(profile.get("name", "")), meta={"harness_profile": profile} if profile else {})
    if job.branch is not None:
        base = replace(base, lineage=Lineage(job.branch.parent, job.branch.branch_call))

    def register() -> str:
        return register_key(link, job, adapter, opts)

    keys: list[str] = []  # the open key (at most one): each attempt registers its own
    t_take = time.monotonic()
    warm = opts.pool.take(job.rollout_id) if opts.pool is not None else None  # made ahead, with its key
    warm_wait_s = time.monotonic() - t_take  # waiting for one the pool was still making
    try:
        keys.append(warm.key if warm is not None else register())
    except Exception as e:  # noqa: BLE001 - recorded, the run goes on
        return _finish(store, replace(base, status="harness_error", error=f"proxy registration failed: {e}"), t0)
    gate = opts.gate or MemoryGate(0)
    try:
        with gate.admit() as waited_s:
            record = _attempts(job, adapter, link, keys, register, store, opts, base,
                               warm.sandbox if warm is not None else None)
        if record.meta.get("warm_sandbox") and "sandbox_s" in record.durations:  # the attempt it served
            record = replace(record, durations={**record.durations,
                                                "sandbox_s": record.durations["sandbox_s"] + warm_wait_s})
        if waited_s > 0.1:  # held back for memory before its sandbox started
            record = replace(record, durations={**record.durations, "memory_wait_s": round(waited_s, 3)})
    except WorkspaceLimitExceeded as e:  # a backstop: the stages below turn it into a record themselves
        record = replace(base, status="workspace_limit", reward=0.0, error=str(e), meta={**base.meta,
                         "workspace_limit": e.limit})
    except Exception as e:  # noqa: BLE001 - a bug in one rollout must not kill the step
        record = replace(base, status="runner_error", error=f"runner error: {type(e).__name__}: {e}")
    finally:
        if warm is not None:  # used by the first attempt (destroyed there) or not at all: gone either way
            warm.sandbox.destroy()
        for key in keys:
            link.close(key)
    return _finish(store, record, t0)


def register_key(link: ProxyLink, job: RolloutJob, adapter: HarnessAdapter, opts: RunOptions) -> str:
    """A proxy key for one attempt of `job`, with its call budget (and a branch's replay)."""
    budget = call_budget(adapter, turns_for(job.task, opts))
    replay = job.branch  # a branch: the proxy answers its first branch_call calls with the parent's
    return link.register(job.rollout_id, max_calls=budget, **({"replay": replay} if replay else {}))


SELF_LIMITED_SLACK = 2  # calls per turn for a harness with a turn limit of its own (a backstop)


def call_budget(adapter: HarnessAdapter, max_turns: int) -> int:
    """The model calls a rollout key may make: `max_turns` for a harness with no turn limit of its
    own (Codex, OpenClaw, `command:`); for one that enforces it (Claude Code's --max-turns), a
    backstop of SELF_LIMITED_SLACK x max_turns that its side calls and retries stay within."""
    if adapter.enforces_max_turns:
        return SELF_LIMITED_SLACK * max_turns
    return max_turns


def _finish(store: RunStore, record: RolloutRecord, t0: float) -> RolloutRecord:
    calls = store.count_calls(record.rollout_id) if hasattr(store, "count_calls") else record.call_count
    record = replace(record, call_count=calls, durations={**record.durations, "total_s": time.monotonic() - t0})
    if record.lineage is not None:
        record = replace(record, lineage=branch_lineage(store, record.rollout_id, record.lineage))
    store.put_rollout(record)
    return record


def _attempts(job: RolloutJob, adapter: HarnessAdapter, link: ProxyLink, keys: list[str], register: Callable[[], str],
              store: RunStore, opts: RunOptions, base: RolloutRecord, warm: Sandbox | None = None) -> RolloutRecord:
    """Attempts until one is not a start failure without calls (or retries run out). `keys` holds
    the open key; a failed attempt's key is closed before its calls are counted, then a new one
    is registered for the next attempt. `warm`: the first attempt's sandbox, made ahead for `keys[0]`."""
    cfg = sandbox_config_for(opts.sandbox_cfg, adapter)
    record, earlier, attempt = base, [], 0
    for attempt in range(opts.start_retries + 1):
        record = _one_attempt(job, adapter, link, keys[-1], store, opts, cfg, base, warm if attempt == 0 else None)
        if attempt == opts.start_retries or record.status not in START_STATUSES:
            break
        link.close(keys.pop())  # from here on a late request of this attempt is refused
        if store.count_calls(job.rollout_id):  # it did make a call: it is the final attempt, never retried
            break
        earlier.append({"status": record.status, "error": record.error[:500]})
        keys.append(register())
    meta = {**record.meta, "attempts": attempt + 1}
    if earlier:
        meta["earlier_attempts"] = earlier
    return replace(record, meta=meta)


def _one_attempt(job: RolloutJob, adapter: HarnessAdapter, link: ProxyLink, key: str, store: RunStore,
                 opts: RunOptions, cfg: SandboxConfig, base: RolloutRecord, warm: Sandbox | None = None) -> RolloutRecord:
    from harnessrl.sandbox.base import ProxyEndpoint

    t0 = time.monotonic()
    if warm is not None:  # made ahead for this rollout and this key (WarmStarts): used once, here
        sandbox = warm
        base = replace(base, meta={**base.meta, "warm_sandbox": True})
    else:
        try:
            sandbox = open_task_sandbox(job.task, cfg, proxy=ProxyEndpoint(port=link.port, key=key))
        except Exception as e:  # noqa: BLE001 - SandboxError, OSError, bad config: all a sandbox failure
            return replace(base, status="sandbox_error", error=f"sandbox start failed: {e}")
    durations = {"sandbox_s": time.monotonic() - t0}
    if opts.live is not None and not opts.live.enter(sandbox):
        sandbox.destroy()
        return replace(base, status="cancelled", error="the run was interrupted before this rollout started")
    try:
        return _run_in(sandbox, job, adapter, key, store, opts, base, durations, link)
    finally:
        if opts.live is not None:
            opts.live.leave(sandbox)


def _run_in(sandbox: Sandbox, job: RolloutJob, adapter: HarnessAdapter, key: str, store: RunStore, opts: RunOptions,
            base: RolloutRecord, durations: dict[str, float], link: ProxyLink) -> RolloutRecord:
    """The harness in an open sandbox, then the verifier (the sandbox is destroyed on the way out).

    However the harness ended (exit 0, a crash, its own process tree killed, a timeout, a context
    overflow), once the policy has sampled a call the workspace it left is scored: ending
    abnormally is never a way out of a low reward (docs/training.md, "Rollout statuses")."""
    with sandbox:
        t1 = time.monotonic()
        result = _harness_run(adapter, sandbox, job, key, opts, link)
        durations["harness_s"] = time.monotonic() - t1
        meta = {"harness_meta": result.meta, "exit_code": result.exit_code,
                "final_message": (result.final_message or "")[:FINAL_MESSAGE_CHARS]}
        meta = {**base.meta, **meta}
        if opts.live is not None and opts.live.cancelled:
            return replace(base, status="cancelled", error="the run was interrupted; the harness was ended",
                           durations=durations, meta=meta)
        status: str = result.status  # a harness status, or the rollout status it becomes
        error = ""
        summary = call_summary(store, job.rollout_id)  # one read of the rollout's calls
        kind, served = summary.kind, summary.served
        if summary.classes:
            meta["call_classes"] = summary.classes  # seq -> main | side | retry | compaction
        too_long = refusal_text("too_long", summary.too_long) if summary.refusals else ""
        if too_long:  # whatever the harness's exit and whatever it did after: a request got no reply
            status = "context_exceeded"
            meta["context_refusals"] = summary.refusals
            error = f"{too_long} (harness: {result.status}{': ' + result.error[:300] if result.error else ''})"
        elif kind == "call_budget":
            meta["end_reason"] = "call_budget"  # the policy used every call it had: its end, like max-turns
            status = "ok"
        elif status != "ok":
            error = result.error or (result.stderr_tail or "")[-1000:]
        if status != "ok" and served == 0:  # the policy sampled nothing
            return replace(base, status=status, error=error, durations=durations, meta=meta)
        payload = {"final_message": result.final_message, "metadata": job.task.metadata,
                   "transcript": _transcript(store, job.rollout_id)}
        earlier_fault = getattr(sandbox, "workspace_fault", None)  # one from the adapter's own copies
        verdict = run_verifier(job.task, sandbox, payload, opts.verifier_timeout_s)
        durations["verifier_s"] = verdict.duration_s
        durations.update({f"verifier_{k}": v for k, v in verdict.stages.items()})  # profile/run_profile.py
        t_down = time.monotonic()
    durations["sandbox_teardown_s"] = time.monotonic() - t_down
    fault = getattr(sandbox, "workspace_fault", None)
    if fault is not None and fault is not earlier_fault:  # passed a host-side limit on its way to the verifier
        meta.update(verifier_status=verdict.status, workspace_limit=fault.limit)
        error = "; ".join(e for e in (error, str(fault)) if e)
        return replace(base, status="workspace_limit", reward=0.0, error=error, durations=durations, meta=meta)
    if verdict.status == "sandbox_error":  # the verifier's own sandbox did not start: the host's failure
        return replace(base, status="sandbox_error", error=verdict.error, durations=durations, meta=meta)
    meta["verifier_status"] = verdict.status
    reward = verdict.reward if verdict.status == "ok" else 0.0  # a verifier failing on its workspace: 0
    final = status if status != "ok" else verdict.status
    if verdict.status in FORGERY_STATUSES:  # a forged reward is named whatever way the harness ended
        meta.update(verdict.meta, harness_status=status)
        final = verdict.status
    error = "; ".join(e for e in (error, verdict.error) if e)
    return replace(base, status=final, reward=reward, checks=verdict.checks, error=error,
                   durations=durations, meta=meta)


def _harness_run(adapter: HarnessAdapter, sandbox: Sandbox, job: RolloutJob, key: str, opts: RunOptions,
                 link: ProxyLink) -> HarnessResult:
    """adapter.run; an adapter that raised (e.g. on output the harness left) is a harness_error."""
    from harnessrl.harness.base import HarnessResult

    try:
        return adapter.run(sandbox, instruction=job.task.instruction, proxy_base=f"{sandbox.proxy_base}/r/{key}",
                           api_key=key, model=opts.model or link.served_model, timeout_s=opts.harness_timeout_s,
                           max_turns=turns_for(job.task, opts))
    except Exception as e:  # noqa: BLE001 - what the harness left is the policy's doing
        return HarnessResult("harness_error", None, "", 0.0, error=f"the adapter failed on the harness's "
                             f"output: {type(e).__name__}: {str(e)[:300]}")


class CallSummary(NamedTuple):
    """What the runner needs of a finished rollout's calls."""

    kind: str  # error kind of the last call ("" when it was served or there is none)
    message: str  # its error message
    served: int  # calls the engine answered (the policy sampled tokens in them)
    refusals: int = 0  # calls refused as too long for the model's context, anywhere in the rollout
    too_long: str = ""  # the first such refusal's message
    classes: dict[str, str] | None = None  # seq -> class of each served call (store/call_classes.py)


def turns_for(task: Task, opts: RunOptions) -> int:
    """The model calls a rollout of `task` may make: the task's own `metadata.max_turns` when it has
    one (a chained task of k steps allows 2 + 2k), else the run's `max_turns`."""
    own = (task.metadata or {}).get("max_turns")
    return int(own) if isinstance(own, int) and not isinstance(own, bool) and own > 0 else opts.max_turns


def call_summary(store: RunStore, rollout_id: str) -> CallSummary:
    """The rollout's calls summed up for its status (one read of the store)."""
    try:
        calls = store.list_calls([rollout_id])
    except Exception:  # noqa: BLE001 - a status detail only
        return CallSummary("", "", 0)
    if not calls:
        return CallSummary("", "", 0)
    served = sum(c.status == "ok" for c in calls)
    refused = [c for c in sorted(calls, key=lambda c: c.seq) if (c.meta or {}).get("error_kind") == "too_long"]
    first = str((refused[0].meta or {}).get("error") or "prompt too long") if refused else ""
    by_id = {c.call_id: c.seq for c in calls}
    classes = {str(by_id[cid]): cls for cid, cls in classify_calls(calls).items()}
    last = max(calls, key=lambda c: c.seq)
    if last.status != "error":
        return CallSummary("", "", served, len(refused), first, classes)
    meta = last.meta or {}
    return CallSummary(str(meta.get("error_kind") or ""), str(meta.get("error") or ""), served, len(refused), first,
                       classes)


def refusal_text(kind: str, message: str) -> str:
    """The "context exceeded" error for a last call refused as too long for the model's context, else ""."""
    return f"context exceeded: {message or 'prompt too long'}" if kind == "too_long" else ""


def context_refusal(store: RunStore, rollout_id: str) -> str:
    """The proxy's "prompt too long" message when the rollout's LAST call was refused for not fitting
    the model's context, else "". (A harness that compacted and went on has a later, ok call.)"""
    summary = call_summary(store, rollout_id)
    return refusal_text(summary.kind, summary.message)


def _transcript(store: RunStore, rollout_id: str) -> list[dict[str, Any]]:
    """The rollout's last request messages plus the reply (what ClawGym's payload calls transcript)."""
    try:
        calls = store.list_calls([rollout_id], include_raw=True)
    except Exception:  # noqa: BLE001 - the transcript is informative only
        return []
    if not calls or not isinstance(calls[-1].request, dict):
        return []
    messages = list(calls[-1].request.get("messages") or [])
    response = calls[-1].response or {}
    choices = response.get("choices") if isinstance(response, dict) else None
    if choices:
        messages.append(choices[0].get("message", {}))
    return messages


def sandbox_config_for(cfg: SandboxConfig | None, adapter: HarnessAdapter) -> SandboxConfig:
    """The run's sandbox config plus the harness's read-only paths (install dirs, runtimes), with
    its memory limit raised to the harness's floor (a harness that cannot start under it would
    only fail every rollout with an OOM kill)."""
    from harnessrl.sandbox.base import SandboxConfig

    cfg = cfg or SandboxConfig()
    have = set(cfg.extra_ro_binds) | ({sys.prefix, sys.base_prefix} if cfg.python else set())
    extra = [str(p) for p in adapter.ro_paths() if str(p) not in have]
    update: dict[str, Any] = {"extra_ro_binds": [*cfg.extra_ro_binds, *extra]} if extra else {}
    floor = adapter.memory_floor_mb()
    if floor is not None and cfg.memory_mb is not None and cfg.memory_mb < floor:
        update["memory_mb"] = floor
    return cfg.model_copy(update=update) if update else cfg


class _progress:
    """A rich progress bar on stderr (or nothing) that counts finished rollouts and passes; when
    stderr is not a terminal, plain lines instead (start, at least every `every_s`, end: plain_progress.py)."""

    def __init__(self, total: int, enabled: bool, every_s: float = 30.0):
        self.total, self.enabled, self.every_s = total, enabled, every_s
        self.done = self.ok = 0
        self.bar: Any = None
        self.plain: PlainProgress | None = None

    def __enter__(self) -> OnDone:
        if not self.enabled:
            return lambda record: None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        console = Console(stderr=True)
        if not console.is_terminal:
            self.plain = PlainProgress("rollouts", lambda line: print(line, file=sys.stderr, flush=True), self.total,
                                       self.every_s)
            self.plain.start()
            return lambda record: self.plain.advance(1, record.status) if self.plain else None
        self.bar = Progress(TextColumn("rollouts"), BarColumn(), MofNCompleteColumn(),
                            TextColumn("{task.description}"), TimeElapsedColumn(), console=console)
        self.bar.start()
        self.tid = self.bar.add_task("", total=self.total)
        return self._advance

    def _advance(self, record: RolloutRecord) -> None:
        self.done += 1
        self.ok += record.status == "ok"
        self.bar.update(self.tid, advance=1, description=f"ok {self.ok}/{self.done}")

    def __exit__(self, *exc: object) -> None:
        if self.plain is not None:
            self.plain.finish()
        elif self.bar is not None:
            self.bar.stop()
