"""The RL loop: `run_training` opens the run, records a baseline eval, runs the steps, finishes.

    for step in 1..N:
        plans    = plan_step(step)                      # groups: task x harness x n, harnesses mixed by weight
        collector.run(plans)                            # rollouts via the runner -> proxy -> store
        groups   = collect_groups(...)                  # read back; branched; uniform ones replaced (run/step_groups.py)
        trees    = build_tree(calls, rollouts)          # one prefix tree per group
        advs     = grpo | tree_grpo | ppo: gae(critic)  # per-token contributions (algo/estimator.py)
        trainer.update(concat_batch(trees, advs))       # tree-packed PPO/GRPO
        engine.update_weights(weights, version=step)    # weight sync; new calls record the version
        every k steps: held-out pass@1 per harness, for each eval set (test / paraphrase / unseen)
        checkpoint (atomic), then store.put_step(step, record)   # the resume point

`run_training` and `train_step` tell that story one phase at a time; the functions below them do
one job each, in the order the story calls them. Opening and closing the run's parts are in
run/open_run.py, the held-out evals in run/evaluate.py, the report at the end in run/finish.py.

Resume: the last step recorded in the store has a complete checkpoint (written first); a resumed
run restores policy, optimizer and RNG from it and continues at the next step. Rollouts of an
interrupted step carry the attempt number in their group ids, so a redo never mixes them in.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

import numpy as np
from rich.console import Console

from harnessrl.algo.estimator import step_advantages
from harnessrl.algo.trained import save_trained
from harnessrl.profile.run_profile import CpuMeter, cache_text
from harnessrl.report.display import RunDisplay
from harnessrl.report.dynamics import harness_dynamics
from harnessrl.report.metrics_log import MetricsLog
from harnessrl.report.record import PolicyLag, StepRecord, TreeTotals, UpdateStats
from harnessrl.report.run_report import kl_text
from harnessrl.rollout.plan import GroupPlan
from harnessrl.config import RunConfig
from harnessrl.run.errors import TrainError
from harnessrl.run.evaluate import baseline_record, closing_eval, evaluate, is_eval_step
from harnessrl.run.finish import RunResult, finish_run
from harnessrl.run.logs import library_logs
from harnessrl.run.open_run import (CollectorFactory, RunParts, StartModel, TasksLoader, close_run, open_run,
                                   with_run_dir)
from harnessrl.run.phase import run_shown, timed
from harnessrl.run.runner_collector import default_collector
from harnessrl.run.step_groups import collect_groups, sampling_text, step_plans, step_rollout_stats
from harnessrl.run.task_sets import default_tasks
from harnessrl.store.run_store import RunStore
from harnessrl.train.batch import TrainBatch, concat_batch
from harnessrl.train.protocol import TrainerBackend
from harnessrl.tree.nodes import PrefixTree

__all__ = ["RunParts", "RunResult", "TrainError", "run_training"]


def run_training(cfg: RunConfig, resume: bool = False, console: Console | None = None,
                 collector_factory: CollectorFactory | None = None,
                 tasks_loader: TasksLoader | None = None, verbose: bool = False,
                 start_model: StartModel | None = None) -> RunResult:
    """Run (or resume) the configured training; returns where the report and plots are.
    `start_model` (the cold start, sft/cold_start.py) gives the checkpoint the run starts from
    instead of model.path, or None.

    Unless ``verbose``, library output (vLLM, transformers, Triton, harness processes) goes to
    <run_dir>/run.log and the terminal shows the run's own progress (run/logs.py, report/display.py)."""
    cfg = with_run_dir(cfg)
    with library_logs(Path(cfg.output.run_dir), console or Console(), verbose) as (console, log_file):
        # Open the run: store, resume point, trainer and engine (at the resumed weights), tasks, collector.
        start = start_model(cfg, console) if start_model else None
        parts = open_run(cfg, resume, console, collector_factory or default_collector, tasks_loader or default_tasks,
                         start)
        try:
            every_s = cfg.output.progress_every_s  # off a terminal: a plain progress line at least this often
            with RunDisplay(console, cfg.loop.steps, parts.start_step, every_s) as display:
                # Baseline: held-out eval of the initial policy, recorded once per run as step 0.
                if 0 not in {s for s, _ in parts.store.list_steps()}:
                    record_step(parts.store, parts.log, 0, baseline_record(parts, display))
                # Steps: train_step runs collect, trees + advantages, update, sync, eval, checkpoint.
                for step in range(parts.start_step, cfg.loop.steps + 1):
                    t0 = time.perf_counter()
                    rec = train_step(parts, step, display)
                    # Record: the step's row in the store commits the step (its checkpoint is on disk).
                    record_step(parts.store, parts.log, step, rec)
                    display.step_done(step, time.perf_counter() - t0, step_line(step, rec))
                    warn_mismatch(console, step, rec, cfg.algorithm.mismatch_kl_warn)
                # A run resumed with loop.steps lowered to the step it had reached still ends evaluated.
                closing_eval(parts, display)
            # Finish: plots, the tree page of the last step, the report and the closing summary.
            return finish_run(parts, console, log_file)
        finally:
            close_run(parts)


def train_step(parts: RunParts, step: int, display: RunDisplay) -> StepRecord:
    """One step: rollouts -> trees -> advantages -> update -> weight sync (-> eval) -> checkpoint."""
    cfg = parts.cfg
    times: dict[str, float] = {}
    t_step, meter = time.perf_counter(), CpuMeter(parts.engine)  # the step's wall; CPU per phase (profile/run_profile.py)

    # Collect: the step's planned groups run (or were started ahead, while earlier steps trained),
    # then the groups are read back from the store, so what trains is exactly what was recorded.
    display.phase(step, "rollouts")
    plans = step_plans(cfg, parts.attempt, parts.train_tasks, step, parts.tracker)
    with timed(times, "rollout", meter):
        if not parts.ahead.wait(step):
            run_shown(parts.collector, plans, display)
    # Branch + informative groups: chosen decisions of the finished groups re-run through the same
    # harness (loop.branching) and join their parents' groups; with loop.dynamic_sampling a group
    # with one outcome is dropped and replaced (run/step_groups.py). The tracker keeps the pass rates.
    def wave(more: Sequence[GroupPlan], key: str) -> None:
        with_branches = " (+ branches)" if any(p.branches for p in more) else ""
        display.phase(step, "branching rollouts" if key == "branch" else f"replacement groups{with_branches}")
        with timed(times, key, meter):
            run_shown(parts.collector, more, display)

    collected = collect_groups(cfg, parts.store, parts.tracker, parts.attempt, parts.train_tasks, plans, wave)
    groups = collected.groups
    parts.tracker.save(parts.run_dir)
    start_ahead(parts, step)

    # Trees + advantages: one prefix tree per group, advantages from the configured estimator;
    # what trains is kept in the run dir for the tree views (trees.html shows exactly this).
    display.phase(step, "trees + advantages")
    with timed(times, "tree", meter):
        trees, advs = step_advantages(groups, cfg.algorithm, cfg.filters, lambda t: tree_values(parts.trainer, t))
        save_trained(parts.run_dir, step, cfg.filters.model_dump(mode="json"), trees, advs)

    # Update: one tree-packed PPO/GRPO update (tokens sampled too many versions ago leave the loss).
    display.phase(step, "train (tree-packed update)")
    lag, update = None, None
    with timed(times, "train", meter):
        if trees:
            trees, advs = harness_ordered(trees, advs)
            batch = concat_batch([t.flat() for t in trees], advs, harnesses=[t.harness for t in trees])
            lag = limit_policy_lag(batch, trees, step - 1, cfg.loop.max_policy_lag)
            update = parts.trainer.update(batch)

    # Sync: the engine serves the updated policy as version `step`; new calls record that version.
    display.phase(step, "weight sync")
    with timed(times, "sync", meter):
        parts.trainer.sync_weights(parts.engine, step)
    version = int(parts.engine.policy_version)

    # Eval: held-out pass@1 per harness on every eval set (every loop.eval_every steps, and the last).
    ev = None
    if is_eval_step(cfg, step):
        with timed(times, "eval", meter):
            ev = evaluate(parts, step, display)

    # Checkpoint (atomic), before the caller records the step: a recorded step can always be resumed.
    display.phase(step, "checkpoint")
    with timed(times, "checkpoint", meter):
        if step % cfg.output.checkpoint_every == 0 or step == cfg.loop.steps:
            save_step_checkpoint(parts, step)
    return StepRecord(policy_version=version, time=times, rollouts=step_rollout_stats(cfg, collected.sampled),
                      trees=tree_totals(trees, len(collected.sampled)), lag=lag, update=update, eval=ev,
                      sampling=collected.stats, dynamics=harness_dynamics(collected.sampled, trees),
                      engine=meter.engine_work(), cpu=meter.phases, wall_s=time.perf_counter() - t_step)


def start_ahead(parts: RunParts, step: int) -> None:
    """Asynchronous rollouts: start the rollouts of steps step+1 .. step+max_policy_lag (those not
    yet started) in the background, so they sample while this step trains and syncs."""
    cfg = parts.cfg
    for s in range(step + 1, min(step + cfg.loop.max_policy_lag, cfg.loop.steps) + 1):
        parts.ahead.start(s, parts.collector, step_plans(cfg, parts.attempt, parts.train_tasks, s, parts.tracker))


# -- trees, advantages, update ---------------------------------------------------------------------

def tree_values(trainer: TrainerBackend, tree: PrefixTree) -> np.ndarray:
    """The critic's value of every tree token (ppo; the config refuses ppo with a remote trainer)."""
    return trainer.tree_values(tree.flat())


def tree_totals(trees: list[PrefixTree], groups: int) -> TreeTotals:
    def total(key: str) -> float:
        return float(sum(getattr(t.stats, key) for t in trees))

    return TreeTotals(unique_tokens=total("unique_tokens"), decision_tokens=total("decision_tokens"),
                      per_call_tokens=total("per_call_tokens"), per_rollout_tokens=total("per_rollout_tokens"),
                      branches=total("branches"), trees=float(len(trees)), groups=float(groups),
                      groups_trained=float(len(trees)))


def harness_ordered(trees: list[PrefixTree], advs: list) -> tuple[list[PrefixTree], list]:
    """The trees (and their advantages) with each harness's together, in their order otherwise: the
    trainer then splits a mixed batch's gradient by harness about once per harness (train/harness_grads.py)."""
    order = sorted(range(len(trees)), key=lambda i: trees[i].harness)
    return [trees[i] for i in order], [advs[i] for i in order]


def limit_policy_lag(batch: TrainBatch, trees: list, trainer_version: int, max_lag: int) -> PolicyLag:
    """Per decision token, lag = trainer_version - the policy version that sampled it. Tokens more
    than max(max_lag, 0) versions old leave the loss (in place: decision off, weight 0; a resumed
    run's leftovers are the only way to get there); TIS/MIS in the loss correct the lag they keep
    (behaviour logprobs are the engine's). Returns the lag histogram (tokens per lag)."""
    version = np.concatenate([np.asarray(t.flat().policy_version, dtype=np.int64) for t in trees])
    lag = trainer_version - version[batch.decision]
    stale = np.zeros_like(batch.decision)
    stale[batch.decision] = lag > max_lag
    if stale.any():
        batch.decision = batch.decision & ~stale
        for name in ("adv_pos", "adv_neg", "weight"):
            setattr(batch, name, np.where(stale, 0.0, getattr(batch, name)).astype(np.float32))
    values, counts = np.unique(lag, return_counts=True)
    return PolicyLag(policy_lag_tokens={str(int(v)): float(c) for v, c in zip(values, counts)},
                     policy_lag_mean=float(lag.mean()) if len(lag) else 0.0,
                     policy_lag_max=float(lag.max()) if len(lag) else 0.0,
                     policy_lag_dropped=float(stale.sum()))


# -- checkpoint, record ----------------------------------------------------------------------------

def save_step_checkpoint(parts: RunParts, step: int) -> Path:
    return parts.trainer.save_checkpoint(parts.run_dir, step, parts.model_dir, parts.cfg.output.keep_checkpoints)


def record_step(store: RunStore, log: MetricsLog, step: int, rec: StepRecord) -> None:
    """The step's record in the store is the commit point of the step (after its checkpoint)."""
    row = rec.to_json()
    store.put_step(step, row)
    log.log(step, row)


def warn_mismatch(console: Console, step: int, rec: StepRecord, threshold: float) -> None:
    """Warn when the trainer/engine mismatch KL(engine || trainer) passes the threshold."""
    kl = rec.update.mismatch_kl if rec.update else None
    if threshold > 0 and isinstance(kl, float) and kl > threshold:
        gap = (rec.update.abs_logp_gap if rec.update else None) or 0.0
        console.print(f"[yellow]warning:[/yellow] step {step}: trainer/engine mismatch KL {kl:.4f} > {threshold:g} "
                      f"(|dlogp| {gap:.4f}); the engine no longer samples the policy being "
                      "trained. Serve in the trainer's precision (engine.dtype=float32) or mask with "
                      "algorithm.is_mode=mis (docs/training.md).")


def step_line(step: int, rec: StepRecord) -> str:
    """The one line a finished step prints."""
    u = rec.update or UpdateStats()
    rw = " ".join(f"{h}={v:.2f}" for h, v in (rec.rollouts.reward if rec.rollouts else {}).items())
    ev = " ".join(f"{h}={v:.2f}" for h, v in (rec.eval.pass_at_1 if rec.eval else {}).items())
    sets = (rec.eval.sets if rec.eval else None) or {}
    if len(sets) > 1:
        ev = "; ".join(f"{name} " + " ".join(f"{h}={a['pass@1']:.2f}" for h, a in per_h.items())
                       for name, per_h in sets.items())
    per_call = rec.trees.per_call_tokens if rec.trees else 0.0
    held = sum((rec.rollouts.memory_held if rec.rollouts else {}).values())
    cos = " ".join(f"{pair}={v:+.2f}" for pair, v in (u.grad_cosine or {}).items())
    return (f"step {step}: reward {rw or '-'} loss {u.loss:+.4f} "
            + (f"kl {kl_text(u.kl)} " if u.kl is not None else "")  # no reference model: no KL to print
            + f"clip {u.clip_frac or 0.0:.3f} |dlogp| {u.abs_logp_gap or 0.0:.4f} "
            f"mismatch KL {kl_text(u.mismatch_kl)} "
            f"tokens {u.tokens_computed:.0f}/{per_call:.0f} "
            f"time " + " ".join(f"{k} {v:.0f}s" for k, v in rec.time.items())
            + (f" | grad cos {cos}" if cos else "") + (f" | {cache}" if (cache := cache_text(rec.engine)) else "")
            + (f" | {held:.0f} rollouts held for memory" if held else "")
            + (f" | {samp}" if (samp := sampling_text(rec.sampling, rec.trees.groups_trained if rec.trees else 0)) else "")
            + (f" | eval {ev}" if ev else ""))


