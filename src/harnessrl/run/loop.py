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
one job each, in the order the story calls them.

Resume: the last step recorded in the store has a complete checkpoint (written first); a resumed
run restores policy, optimizer and RNG from it and continues at the next step. Rollouts of an
interrupted step carry the attempt number in their group ids, so a redo never mixes them in.
"""

from __future__ import annotations

import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import yaml
from rich.console import Console

from harnessrl.algo.estimator import step_advantages
from harnessrl.algo.trained import save_trained
from harnessrl.engine import Engine, ModelNotFound, make_engine, resolve_model
from harnessrl.engine.factory import resolve_engine_type, resolved_dtype
from harnessrl.rollout.branching import branching_summary, sampling_budget
from harnessrl.rollout.difficulty import DifficultyTracker
from harnessrl.rollout.groups import PlannedGroup, read_groups
from harnessrl.rollout.pass_at_k import harness_summary, pass_at_1, summarize
from harnessrl.rollout.plan import GroupPlan, next_attempt, plan_eval
from harnessrl.run.step_groups import collect_groups, observe_eval, sampling_text, step_plans
from harnessrl.run.runner_collector import default_collector
from harnessrl.run.collector import Collector, RolloutsAhead
from harnessrl.run.task_sets import default_tasks
from harnessrl.run.config import RunConfig
from harnessrl.report.display import RunDisplay, changes_table, summary_table
from harnessrl.report.dynamics import harness_dynamics
from harnessrl.run.errors import TrainError
from harnessrl.report.heldout import changes_markdown, headline_cells, held_out_changes
from harnessrl.run.logs import library_logs
from harnessrl.report.metrics_log import MetricsLog, read_jsonl
from harnessrl.report.record import (REDONE, EvalResult, PolicyLag, RolloutStats, StepRecord, TreeTotals,
                                  UpdateStats)
from harnessrl.profile.run_profile import CpuMeter, cache_text, profile_store
from harnessrl.profile.tables import markdown as profile_markdown
from harnessrl.report.run_report import kl_text, write_plots, write_report
from harnessrl.run.trainer_setup import make_sharded_trainer, make_trainer, seed_everything
from harnessrl.report.tracking import Tracker, log_run_end, open_tracker
from harnessrl.store.run_store import RunStore
from harnessrl.train.batch import TrainBatch, concat_batch
from harnessrl.train.checkpoint import latest_checkpoint
from harnessrl.train.protocol import TrainerBackend
from harnessrl.tree.build import build_tree
from harnessrl.algo.views import write_tree_page
from harnessrl.tree.decode import load_decoder
from harnessrl.tree.nodes import PrefixTree

__all__ = ["RunParts", "RunResult", "TrainError", "run_training"]


@dataclass
class RunResult:
    run_dir: Path
    report: Path
    plots_dir: Path
    last_step: int
    records: list[dict[str, Any]]  # the step records as stored (StepRecord.to_json), with "step"


@dataclass
class RunParts:
    """What a run holds while it goes (built by `open_run`, closed by `close_run`)."""

    cfg: RunConfig
    run_dir: Path
    store: RunStore
    trainer: TrainerBackend  # train.trainer.Trainer here, or the Ray actor's RemoteTrainer (cluster.backend=ray)
    engine: Engine
    collector: Collector
    train_tasks: list
    eval_sets: dict[str, list]  # eval set name -> its pinned tasks (the first is the headline set)
    model_dir: Path
    attempt: int
    log: MetricsLog
    start_step: int
    closers: list[Callable[[], None]] = field(default_factory=list)  # e.g. the Ray trainer actor and cluster
    ahead: RolloutsAhead = field(default_factory=lambda: RolloutsAhead(1))  # loop.max_policy_lag > 0
    tracker: DifficultyTracker = field(default_factory=DifficultyTracker)  # pass rates per task (loop.sampler)


CollectorFactory = Callable[[RunConfig, Any, Any, Path], Collector]
TasksLoader = Callable[[RunConfig], tuple[list, "list | dict[str, list]"]]  # (train, eval tasks or sets)


def run_training(cfg: RunConfig, resume: bool = False, console: Console | None = None,
                 collector_factory: CollectorFactory | None = None,
                 tasks_loader: TasksLoader | None = None, verbose: bool = False) -> RunResult:
    """Run (or resume) the configured training; returns where the report and plots are.

    Unless ``verbose``, library output (vLLM, transformers, Triton, harness processes) goes to
    <run_dir>/run.log and the terminal shows the run's own progress (run/logs.py, report/display.py)."""
    cfg = with_run_dir(cfg)
    with library_logs(Path(cfg.output.run_dir), console or Console(), verbose) as (console, log_file):
        # Open the run: store, resume point, trainer and engine (at the resumed weights), tasks, collector.
        parts = open_run(cfg, resume, console, collector_factory or default_collector, tasks_loader or default_tasks)
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
        display.phase(step, "branching rollouts" if key == "branch" else "replacement groups (+ branches)")
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


# -- opening and closing a run ---------------------------------------------------------------------

def open_run(cfg: RunConfig, resume: bool, console: Console, collector_factory: CollectorFactory,
             tasks_loader: TasksLoader) -> RunParts:
    """Store, resume point, seed, policy + trainer and engine (synced to the resume step), metrics
    log, tasks, collector; what was opened is closed again when a later part fails."""
    cfg = with_run_dir(cfg)
    run_dir = Path(cfg.output.run_dir)
    with ExitStack() as opened:
        store = RunStore(run_dir)
        opened.callback(store.close)
        last, ckpt_dir = resume_point(store, run_dir, resume)
        attempt = next_attempt(store)
        store.set_meta("config", cfg.model_dump(mode="json"))
        seed = trainer_seed(cfg, attempt)
        seed_everything(seed)
        model_dir = find_model(cfg.model.path)
        weights_dir = ckpt_dir / "policy" if ckpt_dir and cfg.model.lora is None else model_dir
        announce(console, cfg, run_dir, model_dir, attempt, last)
        trainer, engine, closers = start_trainer_and_engine(cfg, weights_dir, model_dir, ckpt_dir, attempt, seed)
        for close in reversed(closers):
            opened.callback(close)
        opened.callback(engine.close)  # closed before the closers (they may stop the Ray cluster)
        if last > 0:
            trainer.sync_weights(engine, last)
        # output.wandb: step metrics (with the JSONL and TensorBoard), tables, plots and pages at the end
        tracking = open_tracker(cfg.output.wandb, run_dir, cfg.model_dump(mode="json"), store,
                                lambda msg: console.print(f"[yellow]warning:[/yellow] {msg}"))
        log = open_metrics_log(run_dir, cfg.output.tensorboard, store, last, tracking)
        opened.callback(log.close)  # finishes the tracker
        train_tasks, eval_sets = load_tasks(cfg, tasks_loader, store, console)
        collector = collector_factory(cfg, engine, store, run_dir)
        opened.pop_all()  # from here on the run owns them (close_run)
    tracker = DifficultyTracker.load(run_dir, cfg.loop.sampler, last_step=last,  # the resumed steps' estimates
                                     eval_delay=min(cfg.loop.max_policy_lag, 1))
    return RunParts(cfg, run_dir, store, trainer, engine, collector, train_tasks, eval_sets, model_dir,
                    attempt, log, last + 1, closers, RolloutsAhead(max(cfg.loop.max_policy_lag, 1)), tracker)


def with_run_dir(cfg: RunConfig) -> RunConfig:
    """The config with "{time}" in output.run_dir replaced by the start time (once per run)."""
    run_dir = cfg.output.run_dir.replace("{time}", time.strftime("%Y%m%d-%H%M%S"))
    return cfg.model_copy(update={"output": cfg.output.model_copy(update={"run_dir": run_dir})})


def resume_point(store: RunStore, run_dir: Path, resume: bool) -> tuple[int, Path | None]:
    """(last step to keep, its checkpoint dir): (0, None) for a new run. Without `resume` a run dir
    that holds steps is refused. Recorded steps after the last checkpoint (checkpoint_every > 1) are
    marked redone: they run again."""
    steps = [s for s, _ in store.list_steps()]
    if steps and not resume:
        raise TrainError(f"{run_dir} already holds a run (steps up to {max(steps)}): pass --resume to continue "
                         f"it, or choose another directory with output.run_dir=...")
    last = max(steps, default=0)
    ckpt = latest_checkpoint(run_dir, at_most=last) if last > 0 else None
    if last > 0 and (ckpt is None or ckpt[0] != last):
        last = ckpt[0] if ckpt else 0
        for s in [s for s in steps if s > last]:
            store.put_step(s, REDONE)  # overwritten when redone
    return last, (ckpt[1] if ckpt and last > 0 else None)


def trainer_seed(cfg: RunConfig, attempt: int) -> int:
    """The seed of this attempt's RNGs: the run's seed, shifted for each attempt (a resume is a new one)."""
    return cfg.loop.seed + 7919 * (attempt - 1)


def find_model(path: str | None) -> Path:
    """The model's local HF directory (None: the default model); a missing model is a TrainError."""
    try:
        return Path(resolve_model(path))
    except ModelNotFound as err:
        raise TrainError(str(err)) from err


def announce(console: Console, cfg: RunConfig, run_dir: Path, model_dir: Path, attempt: int, last: int) -> None:
    console.print(f"[bold]harnessrl train[/bold] run_dir={run_dir} model={model_dir.name} "
                  f"algorithm={cfg.algorithm.name} engine={resolve_engine_type(cfg.engine.type)} "
                  f"({resolved_dtype(cfg.engine)}) attempt={attempt}"
                  + (f" resuming after step {last}" if last else ""))


def start_trainer_and_engine(cfg: RunConfig, weights_dir: Path, model_dir: Path, ckpt_dir: Path | None,
                             attempt: int, seed: int) -> tuple[TrainerBackend, Engine, list[Callable[[], None]]]:
    """(trainer, engine, closers): in this process, or (cluster.backend=ray) the trainer and the
    engine replicas as Ray actors; the trainer restored from the checkpoint when resuming."""
    engine_cfg = cfg.engine.for_model(str(weights_dir), seed=cfg.engine.seed + cfg.loop.seed + attempt)
    if cfg.cluster.backend == "ray":  # the local backend imports nothing from cluster/
        from harnessrl.cluster.ray_run import start_ray_parts

        make = make_sharded_trainer if cfg.cluster.ray.trainer_world_size > 1 else make_trainer
        build = partial(make, cfg, weights_dir, model_dir, ckpt_dir, seed)  # runs in each trainer actor
        return start_ray_parts(cfg.cluster.ray, engine_cfg, cfg.engine.replicas, build)
    return make_trainer(cfg, weights_dir, model_dir, ckpt_dir), make_engine(engine_cfg), []


def open_metrics_log(run_dir: Path, tensorboard: bool, store: RunStore, last: int,
                     tracker: Tracker | None = None) -> MetricsLog:
    """metrics.jsonl (and TensorBoard) holding the store's records of steps 0..last, each once;
    the tracker gets the steps logged from now on."""
    log = MetricsLog(run_dir, tensorboard, tracker)
    log.rewrite([(s, m) for s, m in store.list_steps() if s <= last])
    return log


def load_tasks(cfg: RunConfig, tasks_loader: TasksLoader, store: RunStore,
               console: Console) -> tuple[list, dict[str, list]]:
    """(train tasks, {eval set name: its pinned tasks}); a loader's single eval list is the first set."""
    train_tasks, evals = tasks_loader(cfg)
    if not isinstance(evals, dict):
        evals = {cfg.tasks.eval_set_names()[0]: evals}
    eval_sets = {name: pinned_eval_tasks(store, tasks, cfg.tasks.eval_set_size(name, cfg.loop.eval_size), console,
                                         key="eval_task_ids" if i == 0 else f"eval_task_ids:{name}")
                 for i, (name, tasks) in enumerate(evals.items())}
    return train_tasks, eval_sets


def pinned_eval_tasks(store: RunStore, eval_tasks: list, size: int, console: Console,
                      key: str = "eval_task_ids") -> list:
    """A held-out set is fixed at the first start of a run (task ids in the store, under `key`) so
    that before/after evals compare the same tasks, even when the suite changes before a resume."""
    by_id = {t.id: t for t in eval_tasks}
    pinned = store.get_meta(key)
    if pinned is None:
        store.set_meta(key, [t.id for t in eval_tasks[:size]])
        return eval_tasks
    missing = [i for i in pinned if i not in by_id]
    if missing:
        console.print(f"[yellow]warning:[/yellow] held-out tasks {missing} are gone from the suite; "
                      "evals of this run compare different task sets")
    return [by_id[i] for i in pinned if i in by_id]


def close_run(parts: RunParts) -> None:
    # the collector first: rollouts still running ahead fail fast without the proxy
    for close in (parts.collector.close, parts.ahead.close, parts.engine.close, parts.log.close,
                  parts.store.close, *parts.closers):
        try:
            close()
        except Exception:  # noqa: BLE001 - best effort on the way out; the run's state is on disk
            pass


# -- collecting ------------------------------------------------------------------------------------

def run_shown(collector: Collector, plans: Sequence[GroupPlan], display: RunDisplay) -> None:
    """Run the plans' rollouts with a progress bar per harness."""
    advance, close = display.rollouts(plans)
    try:
        collector.run(plans, advance)
    finally:
        close()


def step_rollout_stats(cfg: RunConfig, groups: Sequence[PlannedGroup]) -> RolloutStats:
    br = cfg.loop.branching
    branching = branching_summary([r for g in groups for r in g.rollouts]) if br.enabled else None
    budget = sampling_budget([(g.rollouts, g.calls) for g in groups],
                             cfg.loop.n_per_group + (br.points * br.width if br.enabled else 0))
    return RolloutStats(**harness_summary(groups), branching=branching, budget=budget)


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


# -- weight sync, eval, checkpoint, record ---------------------------------------------------------

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


# -- finishing -------------------------------------------------------------------------------------

def finish_run(parts: RunParts, console: Console, log_file: Path | None = None) -> RunResult:
    """Plots, the tree page of the last step, report.md/.html, and the closing summary table."""
    records = read_jsonl(parts.run_dir / "metrics.jsonl")
    plots_dir = parts.run_dir / "plots"
    plots = write_plots(records, plots_dir)
    last = max((r["step"] for r in records), default=0)
    trees = write_last_trees(parts, last, console)
    cfg_json = parts.cfg.model_dump(mode="json")
    cfg_yaml = yaml.safe_dump(cfg_json, sort_keys=False)
    changes = held_out_changes(parts.store.list_rollouts(), cfg_json)
    report = write_report(records, parts.run_dir, plots, f"harnessrl run {parts.run_dir.name}", cfg_yaml, trees,
                          changes_markdown(changes), profile_markdown(profile_store(parts.store)),
                          paired=headline_cells(changes, cfg_json))
    console.print(summary_table(records, parts.run_dir, report.with_suffix(".html"), plots_dir, log_file, trees))
    if changes:
        console.print(changes_table(changes))
    log_run_end(parts.log.tracker, records, plots, changes, [report, report.with_suffix(".html"), trees])
    return RunResult(parts.run_dir, report, plots_dir, last, records)


def write_last_trees(parts: RunParts, step: int, console: Console) -> Path | None:
    """trees.html: the (tree, advantages) pairs the last training step trained, as it saved them
    (algo/trained.py); None if it trained none."""
    if step <= 0:
        return None
    out = parts.run_dir / "trees.html"
    decode = load_decoder("auto", console, parts.cfg.model.path)
    try:
        n = write_tree_page(parts.store, out, f"harnessrl trees · {parts.run_dir.name} · step {step}", decode,
                            step=step, estimator="trained")
    except Exception as err:  # noqa: BLE001 - the run is done and recorded; a view is not worth failing it
        console.print(f"[yellow]tree view not written:[/yellow] {type(err).__name__}: {err}")
        return None
    return out if n else None


@contextmanager
def timed(times: dict[str, float], key: str, cpu: CpuMeter | None = None) -> Iterator[None]:
    """Add the seconds the block takes to times[key] (and its CPU seconds to `cpu`'s phase key)."""
    t0, c0 = time.perf_counter(), cpu.begin() if cpu is not None else {}
    try:
        yield
    finally:
        times[key] = times.get(key, 0.0) + time.perf_counter() - t0
        if cpu is not None:
            cpu.end(key, c0)
