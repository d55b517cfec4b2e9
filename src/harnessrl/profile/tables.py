"""The cost budget of a run (profile/run_profile.py `RunProfile`) as tables: rows, markdown (report.md's
"Cost budget" section), rich tables and plain text for `harnessrl profile`, and a JSON object.

Three tables: the step phases (wall and CPU, per step, share of the steps' wall; the update's parts
under the train phase), each step (its wall, CPU, phases and the engine's prefix-cache figures), and
the parts of a rollout (wall per rollout and its share of a rollout's wall; CPU per rollout and its
share of the rollout phases' CPU), with a small table per harness.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from harnessrl.profile.run_profile import PHASE_NAMES, PHASES, TRAINER_PARTS, Cost, RunProfile

__all__ = ["markdown", "plain_text", "profile_json", "rich_tables", "tables"]

# rollout components: (key in RunProfile.components, name); "in it" rows overlap the harness process
WALL_ROWS = (("memory_wait", "held for memory (before its sandbox)"), ("sandbox_start", "task sandbox start"),
             ("harness", "harness process (start to exit)"),
             ("proxy", "  in it: proxy (render + respond)"),
             ("engine_prefill", "  in it: engine prefill (request-s)"),
             ("engine_decode", "  in it: engine decode (request-s)"),
             ("verifier", "verifier (copy-out, fresh sandbox, check)"),
             ("verifier_copy_out", "verifier: copy-out of the workspace"),
             ("verifier_sandbox", "verifier: its fresh sandbox start"),
             ("verifier_check", "verifier: the check"), ("verifier_other", "verifier: payload and setup"),
             ("verifier_teardown", "verifier sandbox teardown"), ("sandbox_teardown", "task sandbox teardown"),
             ("rest", "other (key, call summary, record): unaccounted"))
OVERLAPPING = ("proxy", "engine_prefill", "engine_decode")
CPU_ROWS = (("harness", "harness process tree"), ("launcher", "harness launcher"),
            ("sandboxes", "sandboxes + verifiers (both sandboxes, less the harness)"),
            ("run", "run process (proxy, runner; an in-process engine)"), ("engine", "engine processes"))
TRAINER_NAMES = {"old_logprobs_s": "  in it: old log-probs (forward, no grad)",
                 "forward_backward_s": "  in it: forward/backward", "optimizer_s": "  in it: optimizer step"}

PHASE_HEADER = ("phase", "wall s", "CPU s", "wall s/step", "CPU s/step", "share of wall")
STEP_HEADER = ("step", "wall s", "CPU s", "rollout", "branch", "train", "sync", "eval", "checkpoint", "prefix cache",
               "prompt tokens computed/sent")
COMPONENT_HEADER = ("rollout component", "wall s/rollout", "share of wall", "CPU s/rollout", "share of CPU")
HARNESS_HEADER = ("harness", "rollouts", "wall s/rollout", "harness s/rollout", "harness CPU s/rollout",
                  "launcher CPU s/rollout", "calls/rollout")


def _num(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def _per(x: float | None, n: int, digits: int = 3) -> str:
    return "-" if x is None or n <= 0 else f"{x / n:.{digits}f}"


def _share(x: float | None, total: float | None) -> str:
    return "-" if x is None or not total else f"{100 * x / total:.0f}%"


def phase_rows(prof: RunProfile) -> list[list[str]]:
    """[phase, wall s, CPU s, wall s/step, CPU s/step, share of wall] per phase (the update's parts
    under train), then the total."""
    n = max(prof.steps, 1)
    order = [p for p in (*PHASES, "other") if p in prof.phases] + [p for p in prof.phases if p not in PHASES
                                                                   and p != "other"]
    rows = []
    for p in order:
        cost = prof.phases[p]
        name = PHASE_NAMES.get(p, "other (between phases): unaccounted" if p == "other" else p)
        rows.append([name, _num(cost.wall_s, 1), _num(cost.cpu_s, 1), _per(cost.wall_s, n, 1), _per(cost.cpu_s, n, 1),
                     _share(cost.wall_s, prof.step_wall_s)])
        if p == "train" and prof.trainer:
            for key in TRAINER_PARTS:
                if key in prof.trainer:
                    s = prof.trainer[key]
                    rows.append([TRAINER_NAMES[key], _num(s, 1), "-", _per(s, n, 1), "-", _share(s, prof.step_wall_s)])
    cpu = sum(prof.processes.values()) if prof.processes else None
    rows.append(["all steps (baseline eval included)", _num(prof.step_wall_s, 1), _num(cpu, 1),
                 _per(prof.step_wall_s, n, 1), _per(cpu, n, 1), "100%" if prof.step_wall_s else "-"])
    return rows


def step_rows(prof: RunProfile) -> list[list[str]]:
    """One row per step: wall, CPU, the phases' walls, the engine's prefix-cache hit rate and the
    prompt tokens it computed of those it was sent."""
    rows = []
    for s in prof.per_step:
        work = s.engine
        rate = work.cache_hit_rate if work is not None else None
        tokens = "-" if work is None or rate is None else (
            f"{work.engine_prompt_tokens - work.engine_cached_tokens:.0f}/{work.engine_prompt_tokens:.0f}")
        rows.append([str(s.step) if s.step else "0 (baseline)", _num(s.wall_s, 1), _num(s.cpu_s, 1),
                     *[_num(s.phases.get(p), 1) for p in ("rollout", "branch", "train", "sync", "eval", "checkpoint")],
                     "-" if rate is None else f"{100 * rate:.0f}%", tokens])
    return rows


def component_rows(prof: RunProfile) -> list[list[str]]:
    """[component, wall s/rollout, share of a rollout's wall, CPU s/rollout, share of the rollout
    phases' CPU] per rollout component, then the total."""
    n, c = prof.n_rollouts, prof.components
    total_wall = c["total"].wall_s if "total" in c else None
    cpu_total = sum(c[k].cpu_s or 0.0 for k, _ in CPU_ROWS if k in c) or None
    rows = []
    for key, name in WALL_ROWS:
        cost = c.get(key)
        if cost is None or cost.wall_s is None:
            continue
        cpu = cost.cpu_s if key == "harness" else None
        rows.append([name, _per(cost.wall_s, n), _share(cost.wall_s, total_wall) if key not in OVERLAPPING else "-",
                     _per(cpu, n), _share(cpu, cpu_total)])
    for key, name in CPU_ROWS:
        cost = c.get(key)
        if key == "harness" or cost is None or cost.cpu_s is None:
            continue
        rows.append([name, "-", "-", _per(cost.cpu_s, n), _share(cost.cpu_s, cpu_total)])
    if total_wall is not None or cpu_total is not None:
        rows.append(["rollout total", _per(total_wall, n), "100%" if total_wall else "-", _per(cpu_total, n),
                     "100%" if cpu_total else "-"])
    return rows


def harness_rows(prof: RunProfile) -> list[list[str]]:
    rows = []
    for name, h in sorted(prof.harnesses.items()):
        n = h.rollouts
        rows.append([name, str(n), _per(h.wall_s, n), _per(h.harness_wall_s, n), _per(h.harness_cpu_s, n),
                     _per(h.launcher_cpu_s, n), _per(float(h.calls), n, 1)])
    return rows


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
    step_u, roll_u = prof.unaccounted_step_share, prof.unaccounted_rollout_share
    if step_u is not None or roll_u is not None:
        lines.append("unaccounted: " + ", ".join(
            part for part in ((f"{100 * step_u:.1f}% of the steps' wall" if step_u is not None else ""),
                              (f"{100 * roll_u:.1f}% of the rollouts' wall" if roll_u is not None else "")) if part))
    return lines


def tables(prof: RunProfile, title: str) -> list[tuple[str, Sequence[str], list[list[str]]]]:
    """(title, header, rows) of each non-empty table."""
    out = [(f"{title}: per step phase", PHASE_HEADER, phase_rows(prof)),
           (f"{title}: each step", STEP_HEADER, step_rows(prof)),
           (f"{title}: per rollout", COMPONENT_HEADER, component_rows(prof)),
           (f"{title}: per harness", HARNESS_HEADER, harness_rows(prof))]
    return [(t, h, r) for t, h, r in out if r]


def _md_table(header: Sequence[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + ["| " + " | ".join(r) + " |" for r in rows]


def markdown(prof: RunProfile, title: str = "run") -> list[str]:
    """The report's "Cost budget" section (markdown lines)."""
    lines = ["## Cost budget (`harnessrl profile`)", "", *[f"- {s}" for s in summary_lines(prof)], ""]
    for name, header, rows in tables(prof, title):
        lines += [f"{name.split(': ', 1)[-1].capitalize()}:", "", *_md_table(header, rows), ""]
    if prof.missing:
        lines += ["Not recorded by this run:", "", *[f"- {m}" for m in prof.missing], ""]
    return lines


def plain_text(prof: RunProfile, title: str) -> str:
    """The tables as aligned plain text (a pipe, a log file)."""
    out = list(summary_lines(prof))
    for name, header, rows in tables(prof, title):
        widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
        fmt = [lambda s, w=w, i=i: s.ljust(w) if i == 0 else s.rjust(w) for i, w in enumerate(widths)]
        out += ["", name, "  ".join(f(h) for f, h in zip(fmt, header)), "  ".join("-" * w for w in widths)]
        out += ["  ".join(f(x) for f, x in zip(fmt, r)) for r in rows]
    if prof.missing:
        out += ["", "not recorded by this run:", *[f"- {m}" for m in prof.missing]]
    return "\n".join(out)


def rich_tables(prof: RunProfile, title: str) -> list[Any]:
    """Rich renderables for a terminal: the summary, the tables, what was not recorded."""
    from rich.table import Table

    out: list[Any] = ["\n".join(summary_lines(prof))]
    for name, header, rows in tables(prof, title):
        table = Table(title=name, title_justify="left", header_style="bold")
        for i, h in enumerate(header):
            table.add_column(h, justify="left" if i == 0 else "right")
        for r in rows:
            table.add_row(*r)
        out.append(table)
    if prof.missing:
        out.append("[dim]not recorded by this run:\n" + "\n".join(f"- {m}" for m in prof.missing) + "[/dim]")
    return out


def _cost(c: Cost, n: int) -> dict[str, float | None]:
    return {"wall_s": c.wall_s, "cpu_s": c.cpu_s, "wall_s_per": None if c.wall_s is None or not n else c.wall_s / n,
            "cpu_s_per": None if c.cpu_s is None or not n else c.cpu_s / n}


def profile_json(prof: RunProfile, run_dir: str) -> dict[str, Any]:
    """The profile for machines: every figure in seconds (sums, and per step or per rollout)."""
    n_steps, n_roll = max(prof.steps, 1), prof.n_rollouts
    return {
        "run_dir": run_dir, "steps": prof.steps, "step_wall_s": prof.step_wall_s,
        "cpu_s_by_process": dict(prof.processes),
        "phases": {p: _cost(c, n_steps) for p, c in prof.phases.items()},
        "trainer": dict(prof.trainer),
        "per_step": [{"step": s.step, "wall_s": s.wall_s, "cpu_s": s.cpu_s, "phases": s.phases,
                      "prefix_cache_hit_rate": s.engine.cache_hit_rate if s.engine else None,
                      "engine_prompt_tokens": s.engine.engine_prompt_tokens if s.engine else None,
                      "engine_cached_tokens": s.engine.engine_cached_tokens if s.engine else None}
                     for s in prof.per_step],
        "rollouts": dict(prof.rollouts), "n_rollouts": n_roll,
        "rollout_components": {k: _cost(c, n_roll) for k, c in prof.components.items()},
        "harnesses": {h: vars(c) for h, c in prof.harnesses.items()},
        "calls": prof.calls,
        "prefix_cache": {"hit_rate": prof.cache_hit_rate, "prompt_tokens_sent": prof.prompt_tokens,
                         "prompt_tokens_cached": prof.cached_tokens,
                         "prompt_tokens_computed": prof.prompt_tokens - prof.cached_tokens,
                         "reported_calls": prof.reported_calls},
        "engine_request_s": {"prefill": prof.engine_prefill_s, "decode": prof.engine_decode_s},
        "unaccounted": {"steps": prof.unaccounted_step_share, "rollouts": prof.unaccounted_rollout_share},
        "missing": list(prof.missing),
    }
