"""Opening and closing a run: `open_run` builds the `RunParts` a run holds while it goes (store,
resume point, seed, trainer and engine synced to the resume step, metrics log and tracker, task
sets, collector), and `close_run` closes them again."""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable

from rich.console import Console

from harnessrl.engine import Engine, ModelNotFound, make_engine, resolve_model
from harnessrl.engine.factory import resolve_engine_type, resolved_dtype
from harnessrl.report.metrics_log import MetricsLog
from harnessrl.report.record import REDONE
from harnessrl.report.tracking import Tracker, open_tracker
from harnessrl.rollout.difficulty import DifficultyTracker
from harnessrl.rollout.plan import next_attempt
from harnessrl.run.collector_seam import Collector, RolloutsAhead
from harnessrl.config import RunConfig
from harnessrl.run.errors import TrainError
from harnessrl.run.task_sets import check_family_weights, without_demonstrated
from harnessrl.run.trainer_setup import make_sharded_trainer, make_trainer, seed_everything
from harnessrl.store.run_store import RunStore
from harnessrl.train.checkpoint import latest_checkpoint
from harnessrl.train.protocol import TrainerBackend


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


CollectorFactory = Callable[[RunConfig, Engine, RunStore, Path], Collector]
TasksLoader = Callable[[RunConfig], tuple[list, "list | dict[str, list]"]]  # (train, eval tasks or sets)
StartModel = Callable[[RunConfig, Console], "Path | None"]  # the checkpoint a run starts from (a cold start)


def open_run(cfg: RunConfig, resume: bool, console: Console, collector_factory: CollectorFactory,
             tasks_loader: TasksLoader, start_model: Path | None = None) -> RunParts:
    """Store, resume point, seed, policy + trainer and engine (synced to the resume step), metrics
    log, tasks, collector; what was opened is closed again when a later part fails. The policy
    starts from `start_model` (a cold start's checkpoint) when given, else from model.path."""
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
        model_dir = find_model(str(start_model) if start_model else cfg.model.path)
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
    model, home = model_dir.resolve(), run_dir.resolve()  # a cold start's checkpoint: cold_start/sft/policy
    console.print(f"[bold]harnessrl train[/bold] run_dir={run_dir} "
                  f"model={model.relative_to(home) if model.is_relative_to(home) else model_dir.name} "
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
    kept = without_demonstrated(train_tasks, cfg.cold_start)
    if len(kept) < len(train_tasks):
        console.print(f"cold start: its {len(train_tasks) - len(kept)} demonstrated tasks are kept out of RL "
                      f"training ({len(kept)} left; cold_start.train_demonstrated=true trains on them)")
    train_tasks = kept
    check_family_weights(train_tasks, cfg.loop.sampler.family_weights)
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
