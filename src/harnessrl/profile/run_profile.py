"""`harnessrl profile RUN_DIR`: where a run's wall time and CPU went, per step and per rollout.

Everything comes from what the run recorded while it ran; nothing is re-measured or estimated:

- step records (report/record.py): seconds per phase (`time`), the whole step (`wall_s`), CPU seconds
  per phase of the run process, of its finished child processes (sandboxes, harnesses, verifiers)
  and of the engine's own processes (`cpu`, measured by `CpuMeter`), and the engine's own count of
  the prompt tokens its prefix cache served (`EngineWork`);
- rollout records (rollout/jobs.py): wall seconds of the sandbox start, the harness, the verifier
  and its stages (the workspace's copy-out, its fresh sandbox, the check, its teardown), the task
  sandbox's teardown and the whole rollout (`durations`), and the CPU of the harness's process tree
  and of its launcher (`meta.harness_meta.cpu_s`, harness/launcher.py);
- the update's parts (train/update_stats.py): old log-probs, forward/backward, optimizer seconds;
- call records (proxy): render and respond seconds in the proxy, and per request what the engine
  reported: prompt tokens served from its prefix cache, prefill and decode seconds.

Derived rows say how they are derived: "sandboxes + verifiers" CPU is the children's CPU of the
rollout phases less the harness trees'; "other" wall is the step's wall less its phases (and a
rollout's, its total less its recorded parts): the unaccounted remainder. Engine prefill/decode are
request-seconds (concurrent requests overlap). A run of older code lacks some records: the profile
shows what there is and lists the rest (`RunProfile.missing`). Tables: profile/tables.py.
"""

from __future__ import annotations

import resource
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from harnessrl.report.record import EngineWork, StepRecord
from harnessrl.store.records import Lineage, RolloutRecord

if TYPE_CHECKING:
    from harnessrl.engine.base import Engine
    from harnessrl.store.run_store import RunStore

__all__ = ["CpuMeter", "RunProfile", "profile_run_dir", "profile_store"]

PHASES = ("rollout", "branch", "tree", "train", "sync", "eval", "checkpoint")
ROLLOUT_PHASES = ("rollout", "branch", "eval")  # phases that run rollouts (sandboxes, harnesses, verifiers)
PHASE_NAMES = {"rollout": "rollouts (the step's groups)", "branch": "branch rollouts", "tree": "trees + advantages",
               "train": "trainer update (batch, forward/backward, optimizer)", "sync": "weight sync", "eval": "held-out eval",
               "checkpoint": "checkpoint"}


# -- measuring (the loop) ----------------------------------------------------------------------------

@runtime_checkable
class ReportsCpu(Protocol):
    """An engine whose work runs in processes of its own (vLLM's engine core): their CPU seconds so far."""

    def cpu_seconds(self) -> float: ...


@runtime_checkable
class CountsWork(Protocol):
    """An engine that counts its own work (requests, prompt and cached tokens, prefill/decode seconds)."""

    def counters(self) -> Mapping[str, float]: ...


def process_cpu(engine: Engine | None = None) -> dict[str, float]:
    """CPU seconds so far: this process (every thread: proxy, runner, trainer, an in-process engine),
    its finished children (sandboxes and everything they ran), and an engine's own processes."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    out = {"run": me.ru_utime + me.ru_stime, "children": kids.ru_utime + kids.ru_stime}
    if isinstance(engine, ReportsCpu):
        try:
            out["engine"] = float(engine.cpu_seconds())
        except Exception:  # noqa: BLE001 - a figure of the profile, never worth failing a step
            pass
    return out


def engine_counters(engine: Engine | None) -> dict[str, float] | None:
    if not isinstance(engine, CountsWork):
        return None
    try:
        return dict(engine.counters())
    except Exception:  # noqa: BLE001 - as above
        return None


class CpuMeter:
    """CPU per phase of one step (`begin`/`end` around each phase) and the engine's counters over
    the step (`engine_work`). The engine's processes are not children that finished, so the three
    sources never count a CPU second twice."""

    def __init__(self, engine: Engine | None = None):
        self.engine = engine
        self.phases: dict[str, dict[str, float]] = {}
        self._counters = engine_counters(engine)

    def begin(self) -> dict[str, float]:
        return process_cpu(self.engine)

    def end(self, phase: str, before: Mapping[str, float]) -> None:
        after = process_cpu(self.engine)
        sums = self.phases.setdefault(phase, {})
        for k, v in after.items():
            sums[k] = sums.get(k, 0.0) + max(0.0, v - before.get(k, 0.0))

    def engine_work(self) -> EngineWork | None:
        """The engine's own figures for the step's requests (None: the engine reports none)."""
        after = engine_counters(self.engine)
        if self._counters is None or after is None:
            return None
        d = {k: v - self._counters.get(k, 0.0) for k, v in after.items()}
        return EngineWork(engine_requests=d.get("requests", 0.0), engine_prompt_tokens=d.get("prompt_tokens", 0.0),
                          engine_cached_tokens=d.get("cached_tokens", 0.0), engine_reported=d.get("reported", 0.0),
                          engine_prefill_s=d.get("prefill_s"), engine_decode_s=d.get("decode_s"))


def cache_text(work: EngineWork | None) -> str:
    """The step line's prefix-cache part: hit rate and the share of sent prompt tokens computed."""
    rate = work.cache_hit_rate if work else None
    if work is None or rate is None:
        return ""
    return (f"prefix cache {100 * rate:.0f}% (computed {work.engine_prompt_tokens - work.engine_cached_tokens:.0f}"
            f"/{work.engine_prompt_tokens:.0f} prompt tokens)")


# -- reading a run -------------------------------------------------------------------------------------

@dataclass
class Cost:
    """Wall and CPU seconds of one component, summed over the steps or rollouts it covers."""

    wall_s: float | None = None
    cpu_s: float | None = None

    def add(self, wall: float | None = None, cpu: float | None = None) -> None:
        if wall is not None:
            self.wall_s = (self.wall_s or 0.0) + wall
        if cpu is not None:
            self.cpu_s = (self.cpu_s or 0.0) + cpu


@dataclass
class StepCost:
    """One step's record as the profile reads it (step 0: the baseline eval)."""

    step: int
    wall_s: float  # recorded wall, else the phases' sum
    phases: dict[str, float]
    cpu_s: float | None
    engine: EngineWork | None
    wall_recorded: bool = True


@dataclass
class HarnessCost:
    """One harness's rollouts: their count and summed wall, harness and launcher CPU, calls."""

    rollouts: int = 0
    wall_s: float = 0.0
    harness_wall_s: float = 0.0
    harness_cpu_s: float | None = None
    launcher_cpu_s: float | None = None
    calls: int = 0


@dataclass
class RunProfile:
    """A run's costs: per step phase (`phases`, `per_step`), per rollout component (`components`,
    keys of COMPONENTS), per harness, the engine's prefix cache, and what the run did not record."""

    steps: int = 0  # training steps (step 0, the baseline eval, counts in the totals, not here)
    step_wall_s: float = 0.0  # sum of the steps' (and the baseline's) recorded wall
    phases: dict[str, Cost] = field(default_factory=dict)  # phase -> cost (+ "other": wall not in a phase)
    trainer: dict[str, float] = field(default_factory=dict)  # TRAINER_PARTS key -> seconds, over the steps
    per_step: list[StepCost] = field(default_factory=list)
    processes: dict[str, float] = field(default_factory=dict)  # run / children / engine -> CPU s
    phase_cpu: dict[str, dict[str, float]] = field(default_factory=dict)  # phase -> process -> CPU s
    rollouts: dict[str, int] = field(default_factory=dict)  # kind (rollout, branch, eval) -> rollouts
    components: dict[str, Cost] = field(default_factory=dict)  # COMPONENTS key -> summed cost
    harnesses: dict[str, HarnessCost] = field(default_factory=dict)
    calls: int = 0
    prompt_tokens: float = 0.0  # sent to the engine (calls that reported their cached tokens)
    cached_tokens: float = 0.0  # of those, served by the engine's prefix cache
    reported_calls: int = 0
    engine_prefill_s: float = 0.0
    engine_decode_s: float = 0.0
    missing: list[str] = field(default_factory=list)  # what this run did not record (older code, engine)

    @property
    def n_rollouts(self) -> int:
        return sum(self.rollouts.values())

    @property
    def cache_hit_rate(self) -> float | None:
        return self.cached_tokens / self.prompt_tokens if self.reported_calls and self.prompt_tokens else None

    @property
    def unaccounted_step_share(self) -> float | None:
        """Share of the steps' wall in no phase (None: no step recorded its wall)."""
        other = self.phases.get("other")
        return None if other is None or not self.step_wall_s else (other.wall_s or 0.0) / self.step_wall_s

    @property
    def unaccounted_rollout_share(self) -> float | None:
        """Share of the rollouts' wall in no recorded part of a rollout (None: no rollout total)."""
        total, rest = self.components.get("total"), self.components.get("rest")
        if total is None or not total.wall_s or rest is None:
            return None
        return (rest.wall_s or 0.0) / total.wall_s


# the parts of a rollout's wall (rollout/jobs.py durations): they add up to its total_s with "rest"
WALL_PARTS = {"memory_wait": "memory_wait_s", "sandbox_start": "sandbox_s", "harness": "harness_s",
              "verifier_copy_out": "verifier_copy_out_s", "verifier_sandbox": "verifier_sandbox_s",
              "verifier_check": "verifier_check_s", "verifier_teardown": "verifier_teardown_s",
              "sandbox_teardown": "sandbox_teardown_s"}
VERIFIER_STAGES = ("verifier_copy_out", "verifier_sandbox", "verifier_check")
# the update's parts (train/update_stats.py), inside the train phase
TRAINER_PARTS = ("old_logprobs_s", "forward_backward_s", "optimizer_s")


def rollout_kind(group_id: str, lineage: Lineage | None) -> str:
    """Which phase ran a rollout: eval (group ids eval-...), branch (it has a lineage), rollout."""
    if group_id.startswith("eval-"):
        return "eval"
    return "branch" if lineage is not None else "rollout"


def harness_cpu(meta: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """(harness tree, launcher) CPU seconds a rollout's launcher reported, None where it did not."""
    cpu = (meta.get("harness_meta") or {}).get("cpu_s") if isinstance(meta.get("harness_meta"), dict) else None
    if not isinstance(cpu, dict):
        return None, None
    tree = float(cpu.get("harness_user_s", 0.0)) + float(cpu.get("harness_system_s", 0.0))
    launcher = float(cpu.get("launcher_user_s", 0.0)) + float(cpu.get("launcher_system_s", 0.0))
    return tree, launcher


def add_steps(prof: RunProfile, steps: Iterable[tuple[int, StepRecord]]) -> None:
    """Phase walls and CPU of the step records (the baseline's eval included), and each step's row."""
    for step, rec in steps:
        prof.steps += step > 0
        named = 0.0
        for phase, seconds in rec.time.items():
            cpu = rec.cpu.get(phase)
            prof.phases.setdefault(phase, Cost()).add(float(seconds), sum(cpu.values()) if cpu else None)
            named += float(seconds)
            for proc, v in (cpu or {}).items():
                prof.processes[proc] = prof.processes.get(proc, 0.0) + v
                by_proc = prof.phase_cpu.setdefault(phase, {})
                by_proc[proc] = by_proc.get(proc, 0.0) + v
        for key in TRAINER_PARTS:
            value = getattr(rec.update, key, None) if rec.update is not None else None
            if isinstance(value, (int, float)):
                prof.trainer[key] = prof.trainer.get(key, 0.0) + float(value)
        wall = rec.wall_s if rec.wall_s is not None else named
        if rec.wall_s is not None:
            prof.phases.setdefault("other", Cost()).add(max(0.0, rec.wall_s - named))
        prof.step_wall_s += wall
        cpu_s = sum(sum(v.values()) for v in rec.cpu.values()) if rec.cpu else None
        prof.per_step.append(StepCost(step, wall, dict(rec.time), cpu_s, rec.engine, rec.wall_s is not None))


def add_rollouts(prof: RunProfile, rollouts: Iterable[RolloutRecord]) -> None:
    """Per-rollout walls (the parts of WALL_PARTS, the rest), the harness trees' CPU, per harness."""
    c = prof.components
    for r in rollouts:
        kind = rollout_kind(r.group_id, r.lineage)
        prof.rollouts[kind] = prof.rollouts.get(kind, 0) + 1
        d = {k: float(v) for k, v in (r.durations or {}).items() if isinstance(v, (int, float))}
        tree, launcher = harness_cpu(r.meta or {})
        known = 0.0
        for name, key in WALL_PARTS.items():
            if key in d:
                c.setdefault(name, Cost()).add(d[key], tree if name == "harness" else None)
                known += d[key]
        if "verifier_s" in d:  # the stages it recorded, or the verifier as one part (an older run)
            staged = sum(d.get(WALL_PARTS[s], 0.0) for s in VERIFIER_STAGES)
            name = "verifier_other" if any(WALL_PARTS[s] in d for s in VERIFIER_STAGES) else "verifier"
            c.setdefault(name, Cost()).add(max(0.0, d["verifier_s"] - staged))
            known += max(0.0, d["verifier_s"] - staged)
        if tree is None and "harness_s" in d:
            c.setdefault("harness", Cost())
        c.setdefault("launcher", Cost()).add(None, launcher)
        if "total_s" in d:
            c.setdefault("total", Cost()).add(d["total_s"])
            c.setdefault("rest", Cost()).add(max(0.0, d["total_s"] - known))
        h = prof.harnesses.setdefault(r.harness, HarnessCost())
        h.rollouts += 1
        h.wall_s += d.get("total_s", 0.0)
        h.harness_wall_s += d.get("harness_s", 0.0)
        h.calls += int(r.call_count or 0)
        if tree is not None:
            h.harness_cpu_s = (h.harness_cpu_s or 0.0) + tree
            h.launcher_cpu_s = (h.launcher_cpu_s or 0.0) + (launcher or 0.0)


def add_calls(prof: RunProfile, calls: Iterable[Mapping[str, Any]]) -> None:
    """Proxy seconds and what the engine reported per request (cached prompt tokens, prefill, decode)."""
    proxy = prof.components.setdefault("proxy", Cost())
    for call in calls:
        prof.calls += 1
        t = (call.get("meta") or {}).get("timings") or {}
        proxy.add(float(t.get("render_s", 0.0)) + float(t.get("respond_s", 0.0)))
        if "engine_cached_tokens" in t:
            prof.reported_calls += 1
            prof.prompt_tokens += float(call.get("n_prompt") or 0)
            prof.cached_tokens += float(t["engine_cached_tokens"])
        prof.engine_prefill_s += float(t.get("engine_prefill_s", 0.0))
        prof.engine_decode_s += float(t.get("engine_decode_s", 0.0))


def derive(prof: RunProfile, harness_cpu_s: float) -> None:
    """CPU rows of the rollout phases that come from two sources, and the engine's rows. The CPU
    rows partition the rollout phases' CPU: the harness trees, their launchers, the sandboxes and
    verifiers (the finished children less the two), the run process (proxy, runner threads, an
    in-process engine) and the engine's own processes."""
    c = prof.components
    children = sum((prof_phase_cpu(prof, p, "children") for p in ROLLOUT_PHASES), 0.0)
    if children:
        c.setdefault("sandboxes", Cost()).add(None, max(0.0, children - harness_cpu_s))
    run = sum((prof_phase_cpu(prof, p, "run") for p in ROLLOUT_PHASES), 0.0)
    if run:
        c.setdefault("run", Cost()).add(None, run)
    engine = sum((prof_phase_cpu(prof, p, "engine") for p in ROLLOUT_PHASES), 0.0)
    if prof.engine_prefill_s or prof.engine_decode_s:
        c.setdefault("engine_prefill", Cost()).add(prof.engine_prefill_s or None)
        c.setdefault("engine_decode", Cost()).add(prof.engine_decode_s or None)
    if engine:
        c.setdefault("engine", Cost()).add(None, engine)


def prof_phase_cpu(prof: RunProfile, phase: str, proc: str) -> float:
    return prof.phase_cpu.get(phase, {}).get(proc, 0.0)


def gaps(prof: RunProfile, rollouts: Sequence[RolloutRecord]) -> list[str]:
    """What the run did not record, each with what the profile shows instead."""
    out = []
    unwalled = [s.step for s in prof.per_step if not s.wall_recorded]
    if unwalled:
        out.append(f"step wall (wall_s) not recorded for {len(unwalled)} of {len(prof.per_step)} steps: their "
                   "phases' sum stands for it, so nothing shows as between phases")
    if prof.per_step and not prof.processes:
        out.append("CPU per phase (cpu) not recorded: no CPU column for the phases and no CPU rows per rollout")
    elif prof.processes and "engine" not in prof.processes:
        out.append("the engine reported no CPU of its own: an in-process engine's CPU is in the run process")
    if not prof.reported_calls and not any(s.engine and s.engine.engine_reported for s in prof.per_step):
        out.append("prefix-cache counts not reported by this engine (vLLM reports them; hf does not)")
    if prof.calls and not (prof.engine_prefill_s or prof.engine_decode_s):
        out.append("engine prefill/decode seconds not reported by this engine")
    if prof.engine_prefill_s or prof.engine_decode_s:
        out.append("engine CPU is not split into prefill and decode: the split is in request-seconds (wall)")
    no_cpu = sum(1 for r in rollouts if harness_cpu(r.meta or {})[0] is None and (r.durations or {}).get("harness_s"))
    if no_cpu:
        out.append(f"harness process CPU not recorded for {no_cpu} rollouts (an older launcher, or a harness "
                   "that runs in the run process, e.g. whitebox)")
    if "verifier" in prof.components:
        out.append("verifier stages (copy-out, fresh sandbox, check, teardown) not recorded: one verifier row")
    if prof.steps and "train" in prof.phases and not prof.trainer:
        out.append("the update's parts (old log-probs, forward/backward, optimizer) not recorded: one train row")
    if prof.n_rollouts:
        out.append("per-rollout CPU of the two sandboxes (the task's, the verifier's) is one figure: the rollout "
                   "phases' finished children less the harness trees")
    return out


def profile_store(store: RunStore) -> RunProfile:
    """The profile of the run in `store`."""
    from harnessrl.report.record import step_records

    rows = [{**row, "step": step} for step, row in store.list_steps() if not row.get("redone")]
    prof = RunProfile()
    add_steps(prof, step_records(rows))
    rollouts = store.list_rollouts()
    add_rollouts(prof, rollouts)
    add_calls(prof, store.list_call_summaries())
    derive(prof, sum((sum(x for x in harness_cpu(r.meta or {}) if x is not None) for r in rollouts), 0.0))
    prof.missing = gaps(prof, rollouts)
    return prof


def profile_run_dir(run_dir: Path) -> RunProfile:
    """The profile of the run in `run_dir`. It opens the store as a run does (schema check, WAL mode),
    so the run dir is not left untouched; the profile itself writes nothing."""
    from harnessrl.store.run_store import RunStore

    with RunStore(run_dir) as store:
        return profile_store(store)
