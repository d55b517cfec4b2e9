"""The RL loop, one readable function per phase.

    for step in 1..N:
        plans    = plan_step(step)                      # groups: task x harness x n, harnesses mixed by weight
        collector.run(plans)                            # rollouts via the runner -> proxy -> store
        groups   = read_groups(store, plans)            # exactly what was recorded
        trees    = build_tree(calls, rollouts)          # one prefix tree per group
        advs     = grpo | tree_grpo | ppo: gae(critic)  # per-token contributions (algo/)
        trainer.update(concat_batch(trees, advs))       # tree-packed PPO/GRPO
        engine.update_weights(weights, version=step)    # weight sync; new calls record the version
        every k steps: held-out pass@1 per harness, for each eval set (test / paraphrase / unseen)
        checkpoint (atomic), then store.put_step(step, metrics)   # the resume point

Resume: the last step recorded in the store has a complete checkpoint (written first); a resumed
run restores policy, optimizer and RNG from it and continues at the next step. Rollouts of an
interrupted step carry the attempt number in their group ids, so a redo never mixes them in.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import yaml
from rich.console import Console

from harnessrl.rollout.groups import PlannedGroup, read_groups
from harnessrl.rollout.metrics import harness_summary, pass_at_1
from harnessrl.rollout.plan import GroupPlan, next_attempt, plan_eval, plan_step
from harnessrl.run.collect import Collector
from harnessrl.run.backends import default_collector
from harnessrl.run.collector import default_tasks
from harnessrl.run.config import RunConfig
from harnessrl.run.display import RunDisplay, summary_table
from harnessrl.run.errors import TrainError
from harnessrl.run.logs import library_logs

__all__ = ["RunParts", "RunResult", "TrainError", "run_training"]


@dataclass
class RunResult:
    run_dir: Path
    report: Path
    plots_dir: Path
    last_step: int
    records: list[dict[str, Any]]


@dataclass
class RunParts:
    """What a run holds while it goes (built by `open_run`, closed at the end)."""

    cfg: RunConfig
    run_dir: Path
    store: Any
    trainer: Any
    engine: Any
    collector: Collector
    train_tasks: list
    eval_sets: dict[str, list]  # eval set name -> its pinned tasks (the first is the headline set)
    model_dir: Path
    attempt: int
    log: Any
    start_step: int
    closers: list = field(default_factory=list)  # e.g. the Ray trainer actor and cluster (cluster.backend=ray)
    ahead: dict = field(default_factory=dict)  # step -> Future of its rollouts (loop.max_policy_lag > 0)
    pool: Any = None  # the thread pool running those rollouts


CollectorFactory = Callable[[RunConfig, Any, Any, Path], Collector]
TasksLoader = Callable[[RunConfig], tuple[list, "list | dict[str, list]"]]  # (train, eval tasks or sets)


@contextmanager
def timed(times: dict[str, float], key: str) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    finally:
        times[key] = times.get(key, 0.0) + time.perf_counter() - t0


def run_training(cfg: RunConfig, resume: bool = False, console: Console | None = None,
                 collector_factory: CollectorFactory | None = None,
                 tasks_loader: TasksLoader | None = None, verbose: bool = False) -> RunResult:
    """Run (or resume) the configured training; returns where the report and plots are.

    Unless ``verbose``, library output (vLLM, transformers, Triton, harness processes) goes to
    <run_dir>/run.log and the terminal shows the run's own progress (run/logs.py, run/display.py)."""
    cfg = with_run_dir(cfg)
    with library_logs(Path(cfg.output.run_dir), console or Console(), verbose) as (console, log_file):
        parts = open_run(cfg, resume, console, collector_factory or default_collector, tasks_loader or default_tasks)
        try:
            with RunDisplay(console, cfg.loop.steps, parts.start_step) as display:
                if 0 not in {s for s, _ in parts.store.list_steps()}:
                    record_step(parts, 0, baseline_record(parts, display))
                for step in range(parts.start_step, cfg.loop.steps + 1):
                    t0 = time.perf_counter()
                    rec = train_step(parts, step, display)
                    record_step(parts, step, rec)
                    display.step_done(step, time.perf_counter() - t0, _step_line(step, rec))
                    warn_mismatch(console, step, rec, cfg.algorithm.mismatch_kl_warn)
            return finish_run(parts, console, log_file)
        finally:
            close_run(parts)


def with_run_dir(cfg: RunConfig) -> RunConfig:
    """The config with "{time}" in output.run_dir replaced by the start time (once per run)."""
    run_dir = cfg.output.run_dir.replace("{time}", time.strftime("%Y%m%d-%H%M%S"))
    return cfg.model_copy(update={"output": cfg.output.model_copy(update={"run_dir": run_dir})})


def warn_mismatch(console: Console, step: int, rec: dict[str, Any], threshold: float) -> None:
    """Warn when the trainer/engine mismatch KL(engine || trainer) passes the threshold."""
    kl = rec.get("mismatch_kl")
    if threshold > 0 and isinstance(kl, float) and kl > threshold:
        console.print(f"[yellow]warning:[/yellow] step {step}: trainer/engine mismatch KL {kl:.4f} > {threshold:g} "
                      f"(|dlogp| {rec.get('abs_logp_gap', 0.0):.4f}); the engine no longer samples the policy being "
                      "trained. Serve in the trainer's precision (engine.dtype=float32) or mask with "
                      "algorithm.is_mode=mis (docs/training.md).")


def open_run(cfg: RunConfig, resume: bool, console: Console, collector_factory: CollectorFactory,
             tasks_loader: TasksLoader) -> RunParts:
    """Store, resume point, policy + trainer, engine (synced to the resume step), collector, tasks."""
    from harnessrl.engine import ModelNotFound, make_engine, resolve_model
    from harnessrl.engine.factory import resolve_engine_type
    from harnessrl.store.run_store import RunStore
    from harnessrl.train.checkpoint import latest_checkpoint, load_trainer_state
    from harnessrl.run.metrics import MetricsLog
    from harnessrl.run.setup import build_trainer, load_policy, restore_trainer, seed_everything

    cfg = with_run_dir(cfg)
    run_dir = Path(cfg.output.run_dir)
    store = RunStore(run_dir)
    steps = [s for s, _ in store.list_steps()]
    if steps and not resume:
        store.close()
        raise TrainError(f"{run_dir} already holds a run (steps up to {max(steps)}): pass --resume to continue "
                         f"it, or choose another directory with output.run_dir=...")
    last = max(steps, default=0)
    ckpt = latest_checkpoint(run_dir, at_most=last) if last > 0 else None
    if last > 0 and (ckpt is None or ckpt[0] != last):
        last = ckpt[0] if ckpt else 0  # steps after the last checkpoint are redone (checkpoint_every > 1)
        for s in [s for s in steps if s > last]:
            store.put_step(s, {"redone": True})  # overwritten when redone
    attempt = next_attempt(store)
    store.set_meta("config", cfg.model_dump(mode="json"))
    seed_everything(cfg.loop.seed + 7919 * (attempt - 1))
    try:
        model_dir = Path(resolve_model(cfg.model.path))
    except ModelNotFound as err:
        store.close()
        raise TrainError(str(err)) from err
    weights_dir = ckpt[1] / "policy" if ckpt and cfg.model.lora is None else model_dir
    console.print(f"[bold]harnessrl train[/bold] run_dir={run_dir} model={model_dir.name} "
                  f"algorithm={cfg.algorithm.name} engine={resolve_engine_type(cfg.engine.type)} "
                  f"({cfg.engine.dtype}) attempt={attempt}"
                  + (f" resuming after step {last}" if last else ""))
    engine_cfg = cfg.engine.model_copy(update={"model": str(weights_dir),
                                               "seed": cfg.engine.seed + cfg.loop.seed + attempt})
    closers: list = []
    if cfg.cluster.backend == "ray":  # trainer and engine replicas as Ray actors (cluster/)
        from harnessrl.cluster.ray_run import start_ray_parts

        trainer, engine, closers = start_ray_parts(cfg, engine_cfg, weights_dir, model_dir,
                                                   ckpt[1] if ckpt else None, cfg.loop.seed + 7919 * (attempt - 1))
    else:
        trainer = build_trainer(cfg, load_policy(cfg, weights_dir), model_dir)
        if ckpt:
            restore_trainer(trainer, load_trainer_state(ckpt[1]))
        engine = make_engine(engine_cfg)
    if last > 0:
        sync_weights(trainer, engine, last)
    log = MetricsLog(run_dir, cfg.output.tensorboard)
    log.rewrite([(s, m) for s, m in store.list_steps() if s <= last])
    try:
        train_tasks, evals = tasks_loader(cfg)
        if not isinstance(evals, dict):
            evals = {cfg.tasks.eval_set_names()[0]: evals}
        eval_sets = {name: pinned_eval_tasks(store, tasks, cfg.loop.eval_size, console,
                                             key="eval_task_ids" if i == 0 else f"eval_task_ids:{name}")
                     for i, (name, tasks) in enumerate(evals.items())}
        collector = collector_factory(cfg, engine, store, run_dir)
    except BaseException:
        for close in (engine.close, log.close, store.close, *closers):
            close()
        raise
    return RunParts(cfg, run_dir, store, trainer, engine, collector, train_tasks, eval_sets, model_dir,
                    attempt, log, last + 1, closers)


def pinned_eval_tasks(store, eval_tasks: list, size: int, console: Console, key: str = "eval_task_ids") -> list:
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
    closers = [parts.collector.close]  # first: rollouts still running ahead fail fast without the proxy
    if parts.pool is not None:
        closers.append(lambda: parts.pool.shutdown(wait=True, cancel_futures=True))
    for close in (*closers, parts.engine.close, parts.log.close, parts.store.close, *parts.closers):
        try:
            close()
        except Exception:  # noqa: BLE001 - best effort on the way out; the run's state is on disk
            pass


def collect(parts: RunParts, plans: list[GroupPlan], display: RunDisplay) -> list[PlannedGroup]:
    advance, close = display.rollouts(plans)
    try:
        parts.collector.run(plans, advance)
    finally:
        close()
    return read_groups(parts.store, plans)


def evaluate(parts: RunParts, step: int, display: RunDisplay) -> dict[str, Any]:
    """Every eval set on its fixed tasks, all harnesses: {"eval": headline set's pass@1 per harness,
    "eval_sets": {set: {harness: pass@1, pass@k, n, 95% interval}}} (empty when eval is off)."""
    from harnessrl.rollout.metrics import summarize

    cfg = parts.cfg
    sets = {name: tasks for name, tasks in parts.eval_sets.items() if tasks}
    if cfg.loop.eval_size == 0 or not sets:
        return {}
    harnesses = [h.name for h in cfg.harnesses]
    plans = {name: plan_eval(step, parts.attempt, tasks, harnesses, cfg.loop.eval_size, cfg.loop.eval_samples,
                             label="" if i == 0 else name)
             for i, (name, tasks) in enumerate(sets.items())}
    display.phase(step, "eval (held-out pass@1)")
    groups = collect(parts, [p for ps in plans.values() for p in ps], display)
    by_id = {g.plan.group_id: g for g in groups}
    out: dict[str, Any] = {"eval": {}, "eval_sets": {}}
    ks = sorted({1, cfg.loop.eval_samples})
    for i, (name, ps) in enumerate(plans.items()):
        set_groups = [by_id[p.group_id] for p in ps]
        if i == 0:
            out["eval"] = pass_at_1(set_groups)
        records = [r for g in set_groups for r in g.rollouts]
        summary = summarize(records, {p.task.id: p.task for p in ps}, ks)
        out["eval_sets"][name] = {h: _compact(a) for h, a in summary["per_harness"].items()}
    return out


def _compact(agg: dict[str, Any]) -> dict[str, Any]:
    keys = [k for k in agg if k.startswith("pass@")] + ["n_tasks", "n_rollouts", "passed"]
    return {k: agg[k] for k in keys if k in agg}


def baseline_record(parts: RunParts, display: RunDisplay) -> dict[str, Any]:
    times: dict[str, float] = {}
    with timed(times, "eval"):
        ev = evaluate(parts, 0, display)
    return {"eval": ev.get("eval", {}), **({"eval_sets": ev["eval_sets"]} if ev else {}),
            "policy_version": int(parts.engine.policy_version), "time": times}


def train_step(parts: RunParts, step: int, display: RunDisplay) -> dict[str, Any]:
    """Rollouts -> trees -> advantages -> update -> sync (-> eval); returns the step's metrics."""
    cfg = parts.cfg
    times: dict[str, float] = {}
    plans = step_plans(parts, step)
    display.phase(step, "rollouts")
    with timed(times, "rollout"):
        ahead = parts.ahead.pop(step, None)
        if ahead is not None:  # started while an earlier step trained (asynchronous rollouts)
            ahead.result()
            groups = read_groups(parts.store, plans)
        else:
            groups = collect(parts, plans, display)
    start_ahead(parts, step)
    display.phase(step, "trees + advantages")
    with timed(times, "tree"):
        trees, advs = trees_and_advantages(parts, groups)
    rec: dict[str, Any] = harness_summary(groups)
    rec.update(tree_totals(trees))
    rec["groups"], rec["groups_trained"] = float(len(groups)), float(len(trees))
    display.phase(step, "train (tree-packed update)")
    with timed(times, "train"):
        if trees:
            from harnessrl.train.batch import concat_batch

            batch = concat_batch([t.flat() for t in trees], advs)
            rec.update(limit_policy_lag(batch, trees, step - 1, cfg.loop.max_policy_lag))
            rec.update(parts.trainer.update(batch))
    display.phase(step, "weight sync")
    with timed(times, "sync"):
        sync_weights(parts.trainer, parts.engine, step)
    rec["policy_version"] = int(parts.engine.policy_version)
    if _is_eval_step(cfg, step):
        with timed(times, "eval"):
            rec.update(evaluate(parts, step, display))
    display.phase(step, "checkpoint")
    with timed(times, "checkpoint"):
        if step % cfg.output.checkpoint_every == 0 or step == cfg.loop.steps:
            save_step_checkpoint(parts, step)
    rec["time"] = times
    return rec


def step_plans(parts: RunParts, step: int) -> list[GroupPlan]:
    cfg = parts.cfg
    return plan_step(step, parts.attempt, parts.train_tasks, {h.name: h.weight for h in cfg.harnesses},
                     cfg.loop.groups_per_step, cfg.loop.n_per_group, cfg.loop.seed)


def start_ahead(parts: RunParts, step: int) -> None:
    """Asynchronous rollouts: start the rollouts of steps step+1 .. step+max_policy_lag (those not
    yet started) in the background, so they sample while this step trains and syncs."""
    from concurrent.futures import ThreadPoolExecutor

    lag = parts.cfg.loop.max_policy_lag
    for s in range(step + 1, min(step + lag, parts.cfg.loop.steps) + 1):
        if s in parts.ahead:
            continue
        if parts.pool is None:
            parts.pool = ThreadPoolExecutor(max_workers=lag, thread_name_prefix="rollouts-ahead")
        parts.ahead[s] = parts.pool.submit(parts.collector.run, step_plans(parts, s), None)


def limit_policy_lag(batch, trees: list, trainer_version: int, max_lag: int) -> dict[str, Any]:
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
    return {"policy_lag_tokens": {str(int(v)): float(c) for v, c in zip(values, counts)},
            "policy_lag_mean": float(lag.mean()) if len(lag) else 0.0,
            "policy_lag_max": float(lag.max()) if len(lag) else 0.0,
            "policy_lag_dropped": float(stale.sum())}


def trees_and_advantages(parts: RunParts, groups: list[PlannedGroup]) -> tuple[list, list]:
    """One prefix tree per group with recorded calls, and its advantages; trees that train no
    token (all filtered, or no decision tokens) are dropped."""
    from harnessrl.algo import gae, grpo, tree_grpo, whiten
    from harnessrl.tree.build import build_tree

    a, filters = parts.cfg.algorithm, parts.cfg.filters
    trees, advs = [], []
    for g in groups:
        if not g.rollouts or not g.calls:
            continue
        tree = build_tree(g.calls, g.rollouts, filters)
        if a.name == "grpo":
            adv = grpo(tree, std=a.std_normalize, per_harness=a.per_harness_norm)
        elif a.name == "tree_grpo":
            adv = tree_grpo(tree, per_harness=a.per_harness_norm)
        else:
            adv = gae(tree, tree_values(parts, tree), gamma=a.gamma, lam=a.lam, per_harness=a.per_harness_norm)
        if adv.norm > 0 and (a.kl_coef > 0 or a.name == "ppo" or _has_signal(adv)):
            trees.append(tree)  # a tree whose advantages are all zero has zero policy gradient
            advs.append(adv)
    if a.name == "ppo" and advs:
        advs = whiten(advs)
    if a.per_harness_loss and advs:
        advs = per_harness_share(trees, advs)
    return trees, advs


def per_harness_share(trees: list, advs: list) -> list:
    """Rescale path weights so each harness's trees carry an equal share of the loss:
    sum_h (1/H) * loss_h / norm_h, with the batch denominator unchanged."""
    from dataclasses import replace

    harness = [next(iter({r.harness for r in t.rollouts.values()}), "") for t in trees]
    norm_h: dict[str, float] = {}
    for h, adv in zip(harness, advs):
        norm_h[h] = norm_h.get(h, 0.0) + adv.norm
    total = sum(norm_h.values())
    return [replace(adv, weight=adv.weight * (total / (len(norm_h) * norm_h[h]))) for h, adv in zip(harness, advs)]


def _has_signal(adv) -> bool:
    return bool(np.any(adv.adv_pos != 0) or np.any(adv.adv_neg != 0))


def tree_values(parts: RunParts, tree) -> np.ndarray:
    from harnessrl.train.batch import forest_of_flat
    from harnessrl.train.critic import forest_values

    t = parts.trainer
    return forest_values(t.critic, forest_of_flat(tree.flat()), t.token_budget, t.backend)


def tree_totals(trees: list) -> dict[str, float]:
    keys = ("unique_tokens", "decision_tokens", "per_call_tokens", "per_rollout_tokens", "branches")
    out = {k: float(sum(getattr(t.stats, k) for t in trees)) for k in keys}
    out["trees"] = float(len(trees))
    return out


def sync_weights(trainer, engine, version: int) -> None:
    """Push the policy's weights (HF names, LoRA merged) into the engine as `version`."""
    if hasattr(trainer, "push_weights"):  # a remote trainer sends them to the replicas itself
        trainer.push_weights(engine, version)
        return
    engine.update_weights(list(trainer.named_weights()), version)


def save_step_checkpoint(parts: RunParts, step: int) -> Path:
    from harnessrl.train.checkpoint import save_checkpoint
    from harnessrl.run.setup import trainer_state

    if hasattr(parts.trainer, "save_checkpoint"):  # a remote trainer writes its own checkpoint
        return parts.trainer.save_checkpoint(parts.run_dir, step, parts.model_dir, parts.cfg.output.keep_checkpoints)
    return save_checkpoint(parts.run_dir, step, parts.trainer.policy, trainer_state(parts.trainer),
                           parts.model_dir, keep=parts.cfg.output.keep_checkpoints)


def record_step(parts: RunParts, step: int, rec: dict[str, Any]) -> None:
    """The step's record in the store is the commit point of the step (after its checkpoint)."""
    parts.store.put_step(step, rec)
    parts.log.log(step, rec)


def finish_run(parts: RunParts, console: Console, log_file: Path | None = None) -> RunResult:
    """Plots, the tree page of the last step, report.md/.html, and the closing summary table."""
    from harnessrl.run.metrics import read_jsonl
    from harnessrl.run.report import write_plots, write_report

    records = read_jsonl(parts.run_dir / "metrics.jsonl")
    plots_dir = parts.run_dir / "plots"
    plots = write_plots(records, plots_dir)
    last = max((r["step"] for r in records), default=0)
    trees = write_last_trees(parts, last, console)
    cfg_yaml = yaml.safe_dump(parts.cfg.model_dump(mode="json"), sort_keys=False)
    report = write_report(records, parts.run_dir, plots, f"harnessrl run {parts.run_dir.name}", cfg_yaml, trees)
    console.print(summary_table(records, parts.run_dir, report.with_suffix(".html"), plots_dir, log_file, trees))
    return RunResult(parts.run_dir, report, plots_dir, last, records)


def write_last_trees(parts: RunParts, step: int, console: Console) -> Path | None:
    """trees.html: the prefix trees of the last training step (rewards, advantages); None if none."""
    from harnessrl.tree.cli import load_decoder, write_tree_page

    if step <= 0:
        return None
    out = parts.run_dir / "trees.html"
    decode = load_decoder("auto", console, parts.cfg.model.path)
    try:
        n = write_tree_page(parts.store, out, f"harnessrl trees · {parts.run_dir.name} · step {step}", decode,
                            step=step, estimator="tree_grpo" if parts.cfg.algorithm.name == "tree_grpo" else "grpo")
    except Exception as err:  # noqa: BLE001 - the run is done and recorded; a view is not worth failing it
        console.print(f"[yellow]tree view not written:[/yellow] {type(err).__name__}: {err}")
        return None
    return out if n else None


def _is_eval_step(cfg: RunConfig, step: int) -> bool:
    return step == cfg.loop.steps or (cfg.loop.eval_every > 0 and step % cfg.loop.eval_every == 0)


def _step_line(step: int, rec: dict[str, Any]) -> str:
    rw = " ".join(f"{h}={v:.2f}" for h, v in rec.get("reward", {}).items())
    ev = " ".join(f"{h}={v:.2f}" for h, v in rec.get("eval", {}).items())
    sets = rec.get("eval_sets") or {}
    if len(sets) > 1:
        ev = "; ".join(f"{name} " + " ".join(f"{h}={a['pass@1']:.2f}" for h, a in per_h.items())
                       for name, per_h in sets.items())
    t = rec.get("time", {})
    return (f"step {step}: reward {rw or '-'} loss {rec.get('loss', 0.0):+.4f} kl {rec.get('kl', 0.0):.4f} "
            f"clip {rec.get('clip_frac', 0.0):.3f} |dlogp| {rec.get('abs_logp_gap', 0.0):.4f} "
            f"mismatch KL {rec.get('mismatch_kl', 0.0):.4f} "
            f"tokens {rec.get('tokens_computed', 0):.0f}/{rec.get('per_call_tokens', 0):.0f} "
            f"time " + " ".join(f"{k} {v:.0f}s" for k, v in t.items()) + (f" | eval {ev}" if ev else ""))
