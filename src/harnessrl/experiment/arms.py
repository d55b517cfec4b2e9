"""`harnessrl experiment`: arms (named sets of config overrides) x seeds, every run a training run,
every arm measured against one shared baseline eval per seed; results over seeds (docs/experiments.md).

    harnessrl experiment configs/experiments/grpo_arms.yaml
    harnessrl experiment -c configs/branching_files.yaml --seeds 0,1,2 --out runs/exp \\
        --arm flat='algorithm.name=grpo loop.branching.points=0' --arm ppo='algorithm.name=ppo' loop.steps=8

The experiment directory holds, for every seed s, `baseline/seed-<s>` (the base config at loop.seed=s
with loop.steps=0: the held-out eval of the base policy, nothing trained) and `<arm>/seed-<s>` (the
base config + the experiment's overrides + the arm's, at loop.seed=s). An arm's run starts from a copy
of its seed's baseline (experiment/shared_baseline.py), so it evaluates the same tasks after training and
never pays for the baseline again. Seeds run in order, every arm of a seed before the next seed.

Resumable: a run whose directory finished (its last step recorded and its report written) is
skipped; one that was interrupted is resumed (`--resume`); a finished run recorded with other
settings than the experiment asks now is refused. The results (experiment/results.py) are
written into the experiment directory: experiment.md, experiment.json, experiment.png.
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator
from rich.console import Console

from harnessrl.errors import HarnessRLError
from harnessrl.config import RunConfig, load_config
from harnessrl.report.record import REDONE
from harnessrl.experiment.shared_baseline import adopt_baseline, baseline_differences
from harnessrl.store.schema import DB_NAME

if TYPE_CHECKING:
    from harnessrl.store.run_store import RunStore

T = TypeVar("T")

BASELINE = "baseline"  # the directory of the baseline runs; not an arm name
_ARM_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


class ExperimentError(HarnessRLError, ValueError):
    """An experiment file, arm or seed list is invalid, or a run dir holds other settings (the message says the fix)."""


class ExperimentSpec(BaseModel):
    """An experiment file (YAML): the base config, overrides for every run, the arms and the seeds."""

    model_config = ConfigDict(extra="forbid")

    config: str | None = None  # the base run config (a path, as `harnessrl train --config` takes it)
    overrides: list[str] = []  # for every run, the baseline runs included
    arms: dict[str, list[str]]  # arm name -> its overrides (a list, or one string split like a shell)
    seeds: list[int] = [0, 1, 2]
    out: str = "runs/experiment"
    reference: str | None = None  # the arm every other is compared with, paired (default: the first)

    @field_validator("arms", mode="before")
    @classmethod
    def _split_strings(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {k: shlex.split(o) if isinstance(o, str) else ([] if o is None else o) for k, o in v.items()}
        return v

    @field_validator("arms")
    @classmethod
    def _arm_names(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        if not v:
            raise ValueError("an experiment needs at least one arm")
        for name in v:
            if not _ARM_NAME.match(name) or name == BASELINE:
                raise ValueError(f"arm name {name!r}: letters, digits, '_', '.', '-' (a directory name), "
                                 f"not {BASELINE!r}")
        return v

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, v: list[int]) -> list[int]:
        if not v or len(set(v)) != len(v):
            raise ValueError(f"seeds must be a non-empty list of distinct integers, got {v}")
        return v

    @model_validator(mode="after")
    def _known_reference(self) -> "ExperimentSpec":
        if self.reference is not None and self.reference not in self.arms:
            raise ValueError(f"reference {self.reference!r} is not an arm ({', '.join(self.arms)})")
        return self

    def reference_arm(self) -> str:
        return self.reference or next(iter(self.arms))


def load_spec(path: Path | None, config: Path | None = None, arms: Sequence[str] = (),
              seeds: str | None = None, out: Path | None = None, overrides: Sequence[str] = ()) -> ExperimentSpec:
    """The experiment of a file (or none), with the command line's settings on top: --config, --seeds
    and --out replace the file's; each --arm NAME=OVERRIDES adds an arm or replaces one; overrides
    are added after the file's."""
    data: dict[str, Any] = {}
    if path is not None:
        if not Path(path).is_file():
            raise ExperimentError(f"experiment file {path} does not exist")
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except yaml.YAMLError as err:
            raise ExperimentError(f"{path}: not valid YAML: {err}") from err
        if not isinstance(data, dict):
            raise ExperimentError(f"{path}: the top level must be a mapping (config, overrides, arms, seeds, out)")
    if config is not None:
        data["config"] = str(config)
    if out is not None:
        data["out"] = str(out)
    if seeds is not None:
        data["seeds"] = parse_seeds(seeds)
    data["overrides"] = [*(data.get("overrides") or []), *overrides]
    data["arms"] = dict(data.get("arms") or {})
    for arm in arms:
        name, sep, text = arm.partition("=")
        if not sep or not name.strip():
            raise ExperimentError(f"--arm {arm!r} must look like NAME='key=value key=value'")
        data["arms"][name.strip()] = text
    try:
        return ExperimentSpec.model_validate(data)
    except ValidationError as err:
        lines = [f"  {'.'.join(map(str, e['loc'])) or '<root>'}: {e['msg']}" for e in err.errors()]
        raise ExperimentError(f"{path or 'the experiment'} is invalid:\n" + "\n".join(lines)) from None


def parse_seeds(text: str) -> list[int]:
    """'0,1,2' -> [0, 1, 2]."""
    try:
        return [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ExperimentError(f"--seeds {text!r} must be integers separated by commas, e.g. 0,1,2") from None


@dataclass(frozen=True)
class PlannedRun:
    arm: str  # BASELINE for a baseline run
    seed: int
    cfg: RunConfig

    @property
    def run_dir(self) -> Path:
        return Path(self.cfg.output.run_dir)

    @property
    def label(self) -> str:
        return f"{self.arm} · seed {self.seed}"


def run_dir_of(out: Path, arm: str, seed: int) -> Path:
    return Path(out) / arm / f"seed-{seed}"


def plan_runs(spec: ExperimentSpec) -> tuple[dict[int, PlannedRun], list[PlannedRun]]:
    """({seed: its baseline run}, the arm runs in the order they run: seed by seed, arms in order).
    Every config is built and checked here, before anything runs."""
    out = Path(spec.out)
    baselines = {s: PlannedRun(BASELINE, s, _config(spec, [f"loop.seed={s}", "loop.steps=0",
                                                            f"output.run_dir={run_dir_of(out, BASELINE, s)}"], BASELINE))
                 for s in spec.seeds}
    for b in baselines.values():
        if b.cfg.loop.eval_size == 0:
            raise ExperimentError("an experiment compares held-out evals: loop.eval_size must be > 0")
        if b.cfg.cold_start.enabled:
            raise ExperimentError("an experiment's runs share their seed's baseline eval, so they start from one "
                                  "checkpoint: make the cold start once (harnessrl demos, then harnessrl sft) and "
                                  "set model.path=<its policy dir> with cold_start.tasks=[] (configs/experiments/"
                                  "multistep_flat_vs_tree.yaml does)")
    runs = []
    for s in spec.seeds:
        for arm, arm_overrides in spec.arms.items():
            cfg = _config(spec, [*arm_overrides, f"loop.seed={s}", f"output.run_dir={run_dir_of(out, arm, s)}"], arm)
            if cfg.loop.steps < 1:
                raise ExperimentError(f"arm {arm!r} trains nothing (loop.steps=0): an arm needs loop.steps >= 1")
            diffs = baseline_differences(baselines[s].cfg.model_dump(mode="json"), cfg.model_dump(mode="json"))
            if diffs:
                raise ExperimentError(f"arm {arm!r} changes what the shared baseline eval depends on: "
                                      f"{', '.join(diffs)}. Set these for every run (the experiment's "
                                      "config or overrides), not in one arm")
            runs.append(PlannedRun(arm, s, cfg))
    return baselines, runs


def _config(spec: ExperimentSpec, extra: list[str], arm: str) -> RunConfig:
    from harnessrl.config import ConfigError

    try:
        return load_config(spec.config, [*spec.overrides, *extra])
    except ConfigError as err:
        raise ExperimentError(f"{arm}: {err}") from None


# -- running ---------------------------------------------------------------------------------------

def run_finished(run: PlannedRun) -> bool:
    """The run dir holds this run, finished: its last step recorded (not marked redone), its report written."""
    if not (run.run_dir / DB_NAME).is_file() or not (run.run_dir / "report.md").is_file():
        return False
    steps = dict(_read_store(run.run_dir, lambda st: st.list_steps()))
    return run.cfg.loop.steps in steps and steps[run.cfg.loop.steps] != REDONE


def stored_differences(run: PlannedRun) -> list[str]:
    """The settings in which the run dir's recorded config differs from the planned one ([] for none yet)."""
    if not (run.run_dir / DB_NAME).is_file():
        return []
    stored = _read_store(run.run_dir, lambda st: st.get_meta("config"))
    if stored is None:
        return []
    return config_differences(stored, run.cfg)


def config_differences(stored: dict[str, Any], planned: Any) -> list[str]:
    """The dotted settings in which a recorded config differs from `planned` (a RunConfig). The
    recorded one is read with today's schema first, so a setting added since then at its default
    is no difference (a run recorded before it existed resumes); one the schema no longer knows is.
    A key that moved since (config/migrate.py MOVED_KEYS, e.g. loop.max_tokens) is read at its new place."""
    import warnings

    from pydantic import ValidationError

    from harnessrl.config.migrate import migrate

    try:
        with warnings.catch_warnings():  # the stored config is the run's record, not the user's file
            warnings.simplefilter("ignore", FutureWarning)
            stored = migrate(stored)
        stored = type(planned).model_validate(stored).model_dump(mode="json")
    except (ValidationError, ValueError):
        pass
    return sorted(_flat_differences(stored, planned.model_dump(mode="json")))


def _flat_differences(a: Any, b: Any, prefix: str = "") -> set[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        return {d for k in set(a) | set(b) for d in _flat_differences(a.get(k), b.get(k), f"{prefix}{k}.")}
    return set() if a == b else {prefix.rstrip(".")}


def _read_store(run_dir: Path, read: Callable[[RunStore], T]) -> T:
    from harnessrl.store.run_store import RunStore

    store = RunStore(run_dir)
    try:
        return read(store)
    finally:
        store.close()


Train = Callable[..., Any]  # run_training's signature: (cfg, resume=..., console=..., **kwargs)


class Progress:
    """One line per run of the experiment: which run, how far, the ETA from the runs so far; a rule
    on a terminal, a plain line elsewhere (CI, `| tee`)."""

    def __init__(self, console: Console, total: int):
        self.console, self.total, self.done = console, total, 0
        self.seconds: list[float] = []

    def line(self, text: str) -> None:
        if self.console.is_terminal:
            self.console.rule(f"[bold]experiment[/bold] {text}", align="left")
        else:
            self.console.print(f"experiment {text}", markup=False, highlight=False)

    def start(self, run: PlannedRun, what: str) -> None:
        self.line(f"[{self.done + 1}/{self.total}] {run.label}: {what}{self._eta()}")

    def finish(self, run: PlannedRun, seconds: float | None) -> None:
        self.done += 1
        if seconds is None:
            self.line(f"[{self.done}/{self.total}] {run.label}: finished before, skipped")
        else:
            self.seconds.append(seconds)
            self.line(f"[{self.done}/{self.total}] {run.label}: done in {seconds:.0f}s{self._eta()}")

    def _eta(self) -> str:
        if not self.seconds or self.done >= self.total:
            return ""
        return f" · ETA {sum(self.seconds) / len(self.seconds) * (self.total - self.done) / 60:.0f} min"


def run_experiment(spec: ExperimentSpec, console: Console, train: Train | None = None,
                   **train_kwargs: Any) -> tuple[dict[int, PlannedRun], list[PlannedRun]]:
    """Run every baseline and arm run not yet finished (train = run/loop.run_training unless given;
    train_kwargs go to it: verbose, and the tests' collector_factory / tasks_loader). Returns the plan."""
    if train is None:
        from harnessrl.run.loop import run_training

        train = run_training
    baselines, runs = plan_runs(spec)
    for run in [*baselines.values(), *runs]:
        diffs = stored_differences(run)
        if diffs:
            raise ExperimentError(f"{run.run_dir} holds a run with other settings ({', '.join(diffs[:6])}"
                                  f"{' ...' if len(diffs) > 6 else ''}): remove it to run it again, or "
                                  "choose another --out")
    out = Path(spec.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "experiment.yaml").write_text(yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False))
    progress = Progress(console, len(baselines) + len(runs))
    for seed in spec.seeds:
        _run_one(baselines[seed], None, train, progress, console, train_kwargs)
        for run in (r for r in runs if r.seed == seed):
            _run_one(run, baselines[seed], train, progress, console, train_kwargs)
    return baselines, runs


def _run_one(run: PlannedRun, baseline: PlannedRun | None, train: Train, progress: Progress,
             console: Console, train_kwargs: dict[str, Any]) -> None:
    if run_finished(run):
        progress.finish(run, None)
        return
    resume = (run.run_dir / DB_NAME).is_file()
    if baseline is not None and not resume:
        adopt_baseline(baseline.run_dir, run.run_dir)  # step 0 is the seed's shared baseline eval
        resume = True
    what = ("baseline eval of the base policy" if baseline is None else f"training {run.cfg.loop.steps} steps")
    progress.start(run, what + (" (resumed)" if resume and (baseline is None or _trained_any(run)) else ""))
    t0 = time.perf_counter()
    train(run.cfg, resume=resume, console=console, **train_kwargs)
    progress.finish(run, time.perf_counter() - t0)


def _trained_any(run: PlannedRun) -> bool:
    return any(s > 0 for s, _ in _read_store(run.run_dir, lambda st: st.list_steps()))


def write_experiment_results(spec: ExperimentSpec, runs: Sequence[PlannedRun]) -> tuple[list[Any], list[str]]:
    """(results, the runs not finished): experiment.md / .json / .png from every finished arm run."""
    from harnessrl.experiment.results import ArmOutcomes, Training, run_pairs, run_training, write_results

    outcomes: ArmOutcomes = {arm: {} for arm in spec.arms}
    training: Training = {arm: {} for arm in spec.arms}
    missing = []
    for run in runs:
        if run_finished(run):
            outcomes[run.arm][run.seed] = run_pairs(run.run_dir)
            training[run.arm][run.seed] = run_training(_read_store(run.run_dir, lambda st: st.list_steps()))
        else:
            missing.append(run.label)
    return write_results(Path(spec.out), outcomes, spec.reference_arm(), missing, training=training), missing
