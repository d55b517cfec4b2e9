"""`harnessrl profile RUN_DIR`: where a run's wall time and CPU went, per step and per rollout.

Everything comes from what the run recorded while it ran; nothing is re-measured or estimated:

- step records (run/record.py): seconds per phase (`time`), the whole step (`wall_s`), CPU seconds
  per phase of the run process, of its finished child processes (sandboxes, harnesses, verifiers)
  and of the engine's own processes (`cpu`, measured by `CpuMeter`), and the engine's own count of
  the prompt tokens its prefix cache served (`EngineWork`);
- rollout records (rollout/jobs.py): wall seconds of the sandbox start, the harness, the verifier
  (its fresh sandbox, the workspace copy and the check) and the whole rollout (`durations`), and the
  CPU of the harness's process tree and of its launcher (`meta.harness_meta.cpu_s`, harness/launcher.py);
- call records (proxy): render and respond seconds in the proxy, and per request what the engine
  reported: prompt tokens served from its prefix cache, prefill and decode seconds.

Derived rows say how they are derived: "sandboxes + verifiers" CPU is the children's CPU of the
rollout phases less the harness trees'; "other" wall is the step's wall less its phases.
Engine prefill/decode are request-seconds (concurrent requests overlap).
"""

from __future__ import annotations

import resource
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harnessrl.run.record import EngineWork, StepRecord

__all__ = ["CpuMeter", "RunProfile", "profile_markdown", "profile_store", "render_table"]

PHASES = ("rollout", "branch", "tree", "train", "sync", "eval", "checkpoint")
ROLLOUT_PHASES = ("rollout", "branch", "eval")  # phases that run rollouts (sandboxes, harnesses, verifiers)
PHASE_NAMES = {"rollout": "rollouts (the step's groups)", "branch": "branch rollouts", "tree": "trees + advantages",
               "train": "trainer forward/backward + optimizer", "sync": "weight sync", "eval": "held-out eval",
               "checkpoint": "checkpoint"}


# -- measuring (the loop) ----------------------------------------------------------------------------

def process_cpu(engine: Any = None) -> dict[str, float]:
    """CPU seconds so far: this process (every thread: proxy, runner, trainer, an in-process engine),
    its finished children (sandboxes and everything they ran), and an engine's own processes."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    out = {"run": me.ru_utime + me.ru_stime, "children": kids.ru_utime + kids.ru_stime}
    engine_cpu = getattr(engine, "cpu_seconds", None)
    if callable(engine_cpu):
        try:
            out["engine"] = float(engine_cpu())
        except Exception:  # noqa: BLE001 - a figure of the profile, never worth failing a step
            pass
    return out


def engine_counters(engine: Any) -> dict[str, float] | None:
    counters = getattr(engine, "counters", None)
    if not callable(counters):
        return None
    try:
        return dict(counters())
    except Exception:  # noqa: BLE001 - as above
        return None


class CpuMeter:
    """CPU per phase of one step (`begin`/`end` around each phase) and the engine's counters over
    the step (`engine_work`). The engine's processes are not children that finished, so the three
    sources never count a CPU second twice."""

    def __init__(self, engine: Any = None):
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
class RunProfile:
    """A run's costs: per step phase (`steps`), per rollout component (`rollouts`), the engine."""

    steps: int = 0  # training steps (step 0, the baseline eval, counts in the totals, not here)
    step_wall_s: float = 0.0  # sum of the steps' (and the baseline's) recorded wall
    phases: dict[str, Cost] = field(default_factory=dict)  # phase -> cost (+ "other": wall not in a phase)
    processes: dict[str, float] = field(default_factory=dict)  # run / children / engine -> CPU s
    phase_cpu: dict[str, dict[str, float]] = field(default_factory=dict)  # phase -> process -> CPU s
    rollouts: dict[str, int] = field(default_factory=dict)  # kind (rollout, branch, eval) -> rollouts
    components: dict[str, Cost] = field(default_factory=dict)  # per-rollout component -> summed cost
    calls: int = 0
    prompt_tokens: float = 0.0  # sent to the engine (calls that reported their cached tokens)
    cached_tokens: float = 0.0  # of those, served by the engine's prefix cache
    reported_calls: int = 0
    engine_prefill_s: float = 0.0
    engine_decode_s: float = 0.0

    @property
    def n_rollouts(self) -> int:
        return sum(self.rollouts.values())

    @property
    def cache_hit_rate(self) -> float | None:
        return self.cached_tokens / self.prompt_tokens if self.reported_calls and self.prompt_tokens else None


def rollout_kind(group_id: str, lineage: Any) -> str:
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
    """Phase walls and CPU of the step records (the baseline's eval included)."""
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
        if rec.wall_s is not None:
            prof.step_wall_s += rec.wall_s
            prof.phases.setdefault("other", Cost()).add(max(0.0, rec.wall_s - named))
        else:
            prof.step_wall_s += named


def add_rollouts(prof: RunProfile, rollouts: Iterable[Any]) -> None:
    """Per-rollout walls (sandbox start, harness, verifier, rest) and the harness trees' CPU."""
    c = prof.components
    for r in rollouts:
        kind = rollout_kind(r.group_id, r.lineage)
        prof.rollouts[kind] = prof.rollouts.get(kind, 0) + 1
        d = r.durations or {}
        tree, launcher = harness_cpu(r.meta or {})
        parts = {"sandbox start": d.get("sandbox_s"), "harness process": d.get("harness_s"),
                 "verifier (fresh sandbox, copy, check)": d.get("verifier_s")}
        for name, wall in parts.items():
            c.setdefault(name, Cost()).add(wall, tree if name == "harness process" else None)
        c.setdefault("harness launcher", Cost()).add(None, launcher)
        if d.get("total_s") is not None:
            known = sum(float(v) for v in parts.values() if v is not None) + float(d.get("memory_wait_s", 0.0))
            c.setdefault("rollout total", Cost()).add(float(d["total_s"]))
            c.setdefault("rest (key, call summary, record)", Cost()).add(max(0.0, float(d["total_s"]) - known))
        if d.get("memory_wait_s"):
            c.setdefault("held for memory", Cost()).add(float(d["memory_wait_s"]))


def add_calls(prof: RunProfile, calls: Iterable[Mapping[str, Any]]) -> None:
    """Proxy seconds and what the engine reported per request (cached prompt tokens, prefill, decode)."""
    proxy = prof.components.setdefault("proxy (render + respond)", Cost())
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
    """Rows that come from two sources: the sandboxes' and verifiers' CPU (the rollout phases'
    finished children, less the harness trees), the proxy's CPU (the run process in those phases)."""
    c = prof.components
    children = sum((prof_phase_cpu(prof, p, "children") for p in ROLLOUT_PHASES), 0.0)
    if children:
        c.setdefault("sandboxes + verifiers (both sandboxes)", Cost()).add(None, max(0.0, children - harness_cpu_s))
    run = sum((prof_phase_cpu(prof, p, "run") for p in ROLLOUT_PHASES), 0.0)
    if run and "proxy (render + respond)" in c:
        c["proxy (render + respond)"].cpu_s = run
    engine = sum((prof_phase_cpu(prof, p, "engine") for p in ROLLOUT_PHASES), 0.0)
    if engine or prof.engine_prefill_s:
        c.setdefault("engine prefill (request-s)", Cost()).add(prof.engine_prefill_s or None)
        c.setdefault("engine decode (request-s)", Cost()).add(prof.engine_decode_s or None)
        c.setdefault("engine processes", Cost()).add(None, engine or None)


def prof_phase_cpu(prof: RunProfile, phase: str, proc: str) -> float:
    return prof.phase_cpu.get(phase, {}).get(proc, 0.0)


def profile_store(store: Any) -> RunProfile:
    """The profile of the run in `store` (a RunStore)."""
    from harnessrl.run.record import step_records

    rows = [{**row, "step": step} for step, row in store.list_steps() if not row.get("redone")]
    steps = step_records(rows)
    prof = RunProfile()
    add_steps(prof, steps)
    rollouts = store.list_rollouts()
    add_rollouts(prof, rollouts)
    add_calls(prof, store.list_call_summaries())
    derive(prof, sum((sum(x for x in harness_cpu(r.meta or {}) if x is not None) for r in rollouts), 0.0))
    return prof


# -- showing it ----------------------------------------------------------------------------------------

def _num(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _per(x: float | None, n: int, digits: int = 3) -> str:
    return "-" if x is None or n <= 0 else f"{x / n:.{digits}f}"


def phase_rows(prof: RunProfile) -> list[list[str]]:
    """[component, wall s, CPU s, wall s/step, CPU s/step, share of wall] per phase, then the total."""
    n = max(prof.steps, 1)
    order = [p for p in (*PHASES, "other") if p in prof.phases] + [p for p in prof.phases if p not in PHASES
                                                                   and p != "other"]
    rows = []
    for p in order:
        cost = prof.phases[p]
        share = f"{100 * (cost.wall_s or 0.0) / prof.step_wall_s:.0f}%" if prof.step_wall_s else "-"
        rows.append([PHASE_NAMES.get(p, p if p != "other" else "other (between phases)"), _num(cost.wall_s, 1),
                     _num(cost.cpu_s, 1), _per(cost.wall_s, n, 1), _per(cost.cpu_s, n, 1), share])
    cpu = sum(prof.processes.values()) if prof.processes else None
    rows.append(["all steps (baseline eval included)", _num(prof.step_wall_s, 1), _num(cpu, 1),
                 _per(prof.step_wall_s, n, 1), _per(cpu, n, 1), "100%"])
    return rows


def component_rows(prof: RunProfile) -> list[list[str]]:
    """[component, wall s/rollout, CPU s/rollout] for the rollout components."""
    n = prof.n_rollouts
    return [[name, _per(cost.wall_s, n), _per(cost.cpu_s, n)] for name, cost in prof.components.items()
            if cost.wall_s is not None or cost.cpu_s is not None]


def summary_lines(prof: RunProfile) -> list[str]:
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(prof.rollouts.items()))
    lines = [f"{prof.steps} steps, {prof.n_rollouts} rollouts ({kinds or 'none'}), {prof.calls} calls"]
    if prof.processes:
        lines.append("CPU s by process: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(prof.processes.items())))
    rate = prof.cache_hit_rate
    if rate is not None:
        lines.append(f"engine prefix cache: {100 * rate:.1f}% of {prof.prompt_tokens:.0f} prompt tokens sent were "
                     f"served from cache; the engine computed {prof.prompt_tokens - prof.cached_tokens:.0f} "
                     f"({100 * (1 - rate):.1f}%) over {prof.reported_calls} calls")
    else:
        lines.append("engine prefix cache: not reported by this engine")
    return lines


def _md_table(header: Sequence[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


PHASE_HEADER = ("phase", "wall s", "CPU s", "wall s/step", "CPU s/step", "share of wall")
COMPONENT_HEADER = ("rollout component", "wall s/rollout", "CPU s/rollout")


def profile_markdown(prof: RunProfile) -> list[str]:
    """The report's "Cost budget" section (markdown lines)."""
    lines = ["## Cost budget (`harnessrl profile`)", "", *[f"- {s}" for s in summary_lines(prof)], ""]
    lines += _md_table(PHASE_HEADER, phase_rows(prof)) + [""]
    comp = component_rows(prof)
    if comp:
        lines += _md_table(COMPONENT_HEADER, comp) + [""]
    return lines


def render_table(prof: RunProfile, title: str) -> list[Any]:
    """Rich renderables for the terminal: the summary, the phase table, the rollout table."""
    from rich.table import Table

    out: list[Any] = ["\n".join(summary_lines(prof))]
    for header, rows, name in ((PHASE_HEADER, phase_rows(prof), f"{title}: per step phase"),
                               (COMPONENT_HEADER, component_rows(prof), f"{title}: per rollout")):
        if not rows:
            continue
        table = Table(title=name, title_justify="left", header_style="bold")
        for i, h in enumerate(header):
            table.add_column(h, justify="left" if i == 0 else "right")
        for r in rows:
            table.add_row(*r)
        out.append(table)
    return out


def profile_run_dir(run_dir: Path) -> RunProfile:
    from harnessrl.store.run_store import RunStore

    with RunStore(run_dir) as store:
        return profile_store(store)
