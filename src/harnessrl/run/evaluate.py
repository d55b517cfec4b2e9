"""Held-out evals: every eval set on its pinned tasks through every eval harness, on the steps that
evaluate (`is_eval_step`), as the baseline (step 0, `baseline_record`) and, for a run resumed with
loop.steps lowered to the step it had reached, once more at the end (`closing_eval`)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from harnessrl.profile.run_profile import CpuMeter
from harnessrl.report.display import RunDisplay
from harnessrl.report.record import EvalResult, StepRecord
from harnessrl.rollout.groups import read_groups
from harnessrl.rollout.pass_at_k import pass_at_1, summarize
from harnessrl.rollout.plan import plan_eval
from harnessrl.config import RunConfig
from harnessrl.run.phase import run_shown, timed
from harnessrl.run.step_groups import observe_eval

if TYPE_CHECKING:
    from harnessrl.run.open_run import RunParts


def is_eval_step(cfg: RunConfig, step: int) -> bool:
    return step == cfg.loop.steps or (cfg.loop.eval_every > 0 and step % cfg.loop.eval_every == 0)


def evaluate(parts: RunParts, step: int, display: RunDisplay) -> EvalResult | None:
    """Every eval set on its fixed tasks, all harnesses: the headline set's pass@1 per harness, and
    per set and harness pass@1, pass@k, n and the 95% interval (None when eval is off)."""
    cfg = parts.cfg
    sets = {name: tasks for name, tasks in parts.eval_sets.items() if tasks}
    if cfg.loop.eval_size == 0 or not sets:
        return None
    harnesses = [h.name for h in cfg.eval_harness_entries()]
    size, samples = cfg.tasks.eval_set_size, cfg.tasks.eval_set_samples
    plans = {name: plan_eval(step, parts.attempt, tasks, harnesses, size(name, cfg.loop.eval_size),
                             samples(name, cfg.loop.eval_samples), label="" if i == 0 else name)
             for i, (name, tasks) in enumerate(sets.items())}
    display.phase(step, "eval (held-out pass@1)")
    all_plans = [p for ps in plans.values() for p in ps]
    run_shown(parts.collector, all_plans, display)
    by_id = {g.plan.group_id: g for g in read_groups(parts.store, all_plans)}
    observe_eval(parts.tracker, step, list(by_id.values()))  # eval groups inform the sampler's family rates
    parts.tracker.save(parts.run_dir)
    headline: dict[str, float] = {}
    per_set: dict[str, dict[str, dict[str, Any]]] = {}
    for i, (name, ps) in enumerate(plans.items()):
        ks = sorted({1, samples(name, cfg.loop.eval_samples)})
        set_groups = [by_id[p.group_id] for p in ps]
        if i == 0:
            headline = pass_at_1(set_groups)
        records = [r for g in set_groups for r in g.rollouts]
        summary = summarize(records, {p.task.id: p.task for p in ps}, ks)
        per_set[name] = {h: compact(agg) for h, agg in summary["per_harness"].items()}
    return EvalResult(pass_at_1=headline, sets=per_set)


def closing_eval(parts: RunParts, display: RunDisplay) -> None:
    """When the run's last step (loop.steps) was recorded without an eval, because the run was
    resumed with loop.steps lowered to the step it had reached (how a long run is cut short), the
    engine serves that step's policy: evaluate it now and add the eval to the step's record."""
    last = parts.cfg.loop.steps
    steps = dict(parts.store.list_steps())
    if last < 1 or parts.start_step != last + 1 or last not in steps:
        return
    rec = StepRecord.from_json(steps[last])
    if rec.eval is not None:
        return
    times: dict[str, float] = {}
    with timed(times, "eval"):
        rec.eval = evaluate(parts, last, display)
    if rec.eval is None:
        return
    rec.time["eval"] = times["eval"]
    parts.store.put_step(last, rec.to_json())
    parts.log.amend(last, rec.to_json(), parts.store.list_steps())


def compact(agg: dict[str, Any]) -> dict[str, Any]:
    """The part of an eval aggregate a step record keeps: pass@k (with intervals) and counts."""
    keys = [k for k in agg if k.startswith("pass@")] + ["n_tasks", "n_rollouts", "passed"]
    return {k: agg[k] for k in keys if k in agg}


def baseline_record(parts: RunParts, display: RunDisplay) -> StepRecord:
    """Step 0: the held-out eval of the initial policy (an empty one when eval is off)."""
    times: dict[str, float] = {}
    t0, meter = time.perf_counter(), CpuMeter(parts.engine)
    with timed(times, "eval", meter):
        ev = evaluate(parts, 0, display)
    return StepRecord(policy_version=int(parts.engine.policy_version), time=times,
                      eval=ev or EvalResult(pass_at_1={}), engine=meter.engine_work(), cpu=meter.phases,
                      wall_s=time.perf_counter() - t0)
