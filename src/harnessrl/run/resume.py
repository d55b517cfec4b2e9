"""What `harnessrl train --resume` decides from the run directory alone, before any engine starts
(`plan_resume`): there is a run to resume (else ConfigError with the fix); the run is complete
(nothing to do: "run complete (8/8 steps): raise loop.steps to continue"); or it continues, with the
settings that changed since the run stored its config. A changed setting that changes the training
(`optimizer.lr`, the algorithm, the tasks, ...) is refused, naming it, unless it is allowed by name
(`--allow-change optimizer.lr`); an allowed change is recorded in the run (`record_changes`: meta
"config_changes", one entry per key and attempt). Settings that only change how the run goes
(`loop.steps`, concurrency, output, cluster placement, engine capacity: OPERATIONAL_KEYS) may change
freely.

    cfg = build_config(stored_run_config(run_dir), overrides)   # --resume without --config: the run's own
    plan = plan_resume(cfg, allowed=["optimizer.lr"])
    if plan.complete: print(plan.complete)
    else: record_changes(run_dir, plan.changes); run_training(cfg, resume=True)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from harnessrl.config import ConfigError, RunConfig, build_config
from harnessrl.store import RunStore
from harnessrl.store.schema import DB_NAME

# dotted keys (or sections, ending in ".") that a resume may change: they change how the run goes,
# not what it trains on or how it learns
OPERATIONAL_KEYS = (
    "loop.steps", "loop.concurrency", "loop.memory_reserve_gib", "loop.eval_every", "output.", "cluster.",
    "engine.max_batch", "engine.max_pending", "engine.kv_cache_gib", "engine.gpu_memory_utilization",
    "engine.base_urls", "engine.replicas", "engine.num_threads", "engine.request_timeout_s",
    "engine.served_model_name",
)
CHANGES_KEY = "config_changes"  # run store meta: the changes allowed at each resume


@dataclass(frozen=True)
class Change:
    key: str  # dotted, e.g. optimizer.lr
    before: Any
    after: Any

    def __str__(self) -> str:
        return f"{self.key} {self.before!r} -> {self.after!r}"


@dataclass(frozen=True)
class ResumePlan:
    last_step: int  # the last step the run recorded (0: only its baseline, or nothing yet)
    complete: str | None  # the message when there is nothing left to run, else None
    changes: list[Change] = field(default_factory=list)  # training settings changed (all allowed)
    operational: list[Change] = field(default_factory=list)  # the other settings changed


def plan_resume(cfg: RunConfig, allowed: Sequence[str] = ()) -> ResumePlan:
    """The resume of the run in cfg.output.run_dir as cfg would run it (see the module docstring)."""
    run_dir = Path(cfg.output.run_dir)
    if "{time}" in cfg.output.run_dir:
        raise ConfigError(f"output.run_dir {cfg.output.run_dir} names a new directory each start: pass the run's "
                            "own, e.g. output.run_dir=runs/20261207-101500")
    if not (run_dir / DB_NAME).is_file():
        raise ConfigError(f"{run_dir} holds no run to resume (no {DB_NAME}): start it without --resume, or pass "
                            "the output.run_dir of an earlier run")
    with RunStore(run_dir) as store:
        stored = store.get_meta("config")
        steps = {s: m for s, m in store.list_steps() if not m.get("redone")}
    if not isinstance(stored, dict):
        raise ConfigError(f"{run_dir} holds no training run (no stored config: it was written by rollout, eval or "
                            "serve); start a run there without --resume or choose another output.run_dir")
    changed = config_changes(stored, cfg)
    training = [c for c in changed if not is_operational(c.key)]
    refused = [c for c in training if c.key not in allowed]
    if refused:
        keys = " ".join(f"--allow-change {c.key}" for c in refused)
        raise ConfigError(f"{run_dir} was trained with other settings: {'; '.join(map(str, refused))}. A resume "
                            f"with them changes the training: set them back, or pass {keys} (recorded in the run)")
    last = max(steps, default=0)
    return ResumePlan(last, complete_message(cfg.loop.steps, steps, (run_dir / "report.md").is_file()), training,
                      [c for c in changed if is_operational(c.key)])


def stored_run_config(run_dir: Path) -> dict[str, Any] | None:
    """The config a training run stored in `run_dir` (None when there is none): what `train --resume`
    without --config continues with."""
    if not (run_dir / DB_NAME).is_file():
        return None
    with RunStore(run_dir) as store:
        stored = store.get_meta("config")
    return stored if isinstance(stored, dict) else None


def complete_message(goal: int, steps: dict[int, dict[str, Any]], reported: bool) -> str | None:
    """"run complete (8/8 steps): ..." when the run recorded loop.steps steps or more, its last one
    evaluated, and wrote its report; None when a resume has something to run."""
    last = max(steps, default=-1)
    if last < goal or not reported:
        return None
    if goal >= 1 and last == goal and not isinstance(steps[goal].get("eval"), dict):
        return None  # resumed with loop.steps lowered to an uneval'd step: the run evaluates it (closing eval)
    if last > goal:
        return f"run complete ({last} steps recorded, loop.steps={goal}): raise loop.steps above {last} to continue"
    return f"run complete ({last}/{goal} steps): raise loop.steps to continue"


def config_changes(stored: dict[str, Any], cfg: RunConfig) -> list[Change]:
    """Every dotted key whose value differs between the stored config (read as today's schema reads it)
    and `cfg`, output.run_dir aside."""
    try:
        before = build_config(stored).model_dump(mode="json")
    except ConfigError:  # stored by an older schema that no longer loads: compare what it holds
        before = stored
    old, new = flatten(before), flatten(cfg.model_dump(mode="json"))
    return [Change(k, old.get(k), new.get(k)) for k in sorted(old.keys() | new.keys())
            if k != "output.run_dir" and old.get(k) != new.get(k)]


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}; a list is one value."""
    out: dict[str, Any] = {}
    for k, v in data.items():
        if isinstance(v, dict) and v:
            out.update(flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def is_operational(key: str) -> bool:
    return any(key == k or (k.endswith(".") and key.startswith(k)) or key.startswith(k + ".")
               for k in OPERATIONAL_KEYS)


def record_changes(run_dir: Path, changes: Sequence[Change], attempt: int) -> None:
    """Add the allowed changes of this resume (`attempt`: the attempt it starts) to the run's record."""
    if not changes:
        return
    with RunStore(run_dir) as store:
        kept = list(store.get_meta(CHANGES_KEY, []) or [])
        kept += [{"attempt": attempt, "key": c.key, "before": c.before, "after": c.after} for c in changes]
        store.set_meta(CHANGES_KEY, kept)


def next_attempt_number(run_dir: Path) -> int:
    """The attempt number the next start of the run will take (rollout/plan.py next_attempt counts it)."""
    from harnessrl.rollout.plan import ATTEMPT_KEY

    with RunStore(run_dir) as store:
        return int(store.get_meta(ATTEMPT_KEY, 0)) + 1
