"""Experiment trackers: the run's metrics, tables, plots and pages mirrored to an outside tracker.

The run store stays the record (report/metrics_log.py); a tracker only mirrors it. `Tracker` is the
seam: W&B (`output.wandb`) is the one implementation here, and an MLflow or trackio tracker is one
more class with the same five methods and a branch in `open_tracker`.

    output.wandb: {project: harnessrl, name: null, mode: online | offline | disabled}

Every step's record goes out as flat scalars (`reward/builtin`, `eval_sets/test/builtin/pass@1`,
`dynamics/codex/calls_per_rollout`, ...) at its step; at the end of the run, the tables
`tables/eval` (per eval step, set and harness), `tables/held_out_change` (report/heldout.py) and
`tables/harness_dynamics` (report/dynamics.py), the plots (`plots/<stem>`), and the report and tree
pages as the artifact `run-pages`. A tracker never fails a run: `SafeTracker` turns any error of
the tracker into one warning and stops tracking.

A resumed run continues the same W&B run: its id is kept in the run store (meta `wandb_run_id`).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

from harnessrl.report.dynamics import dynamics_rows, DYNAMICS_COLUMNS
from harnessrl.report.record import step_records
from harnessrl.report.transfer import Cell

Warn = Callable[[str], None]
TableCell = str | int | float | bool | None
Table = tuple[list[str], list[list[TableCell]]]  # (columns, rows)
RUN_ID_KEY = "wandb_run_id"


class Tracker(Protocol):
    def log_step(self, step: int, metrics: Mapping[str, float]) -> None:
        """Scalars of one step (steps arrive in increasing order)."""
        ...

    def log_table(self, key: str, columns: Sequence[str], rows: Sequence[Sequence[TableCell]]) -> None: ...

    def log_images(self, key: str, paths: Sequence[Path]) -> None:
        """PNG files, one image each under key/<file stem>."""
        ...

    def log_files(self, name: str, kind: str, paths: Sequence[Path]) -> None:
        """Files kept together as one artifact (W&B) or run artifact (MLflow)."""
        ...

    def finish(self) -> None: ...


class Meta(Protocol):
    """Where a tracker keeps its run id between attempts (the run store)."""

    def get_meta(self, key: str) -> object: ...

    def set_meta(self, key: str, value: str) -> None: ...


class SafeTracker:
    """A tracker whose errors are warnings: the first error is reported once, then tracking stops
    (the run and its store go on as if no tracker were configured)."""

    def __init__(self, inner: Tracker, warn: Warn, name: str = "W&B"):
        self.inner, self.warn, self.name = inner, warn, name
        self.failed = self.finished = False

    def _call(self, what: str, fn: Callable[[], None]) -> None:
        if self.failed:
            return
        try:
            fn()
        except Exception as err:  # noqa: BLE001 - a tracker must never fail a run
            self.failed = True
            self.warn(f"{self.name} {what} failed ({type(err).__name__}: {err}); the run goes on without "
                      f"{self.name}, its record is in the run store")

    def log_step(self, step: int, metrics: Mapping[str, float]) -> None:
        self._call("logging", lambda: self.inner.log_step(step, metrics))

    def log_table(self, key: str, columns: Sequence[str], rows: Sequence[Sequence[TableCell]]) -> None:
        self._call(f"table {key}", lambda: self.inner.log_table(key, columns, rows))

    def log_images(self, key: str, paths: Sequence[Path]) -> None:
        self._call(f"images {key}", lambda: self.inner.log_images(key, paths))

    def log_files(self, name: str, kind: str, paths: Sequence[Path]) -> None:
        self._call(f"artifact {name}", lambda: self.inner.log_files(name, kind, paths))

    def finish(self) -> None:
        """Finish the tracker's run once; tried even after an error (W&B then closes its files)."""
        if self.finished:
            return
        self.finished = True
        if not self.failed:
            self._call("finish", self.inner.finish)
        else:  # already warned once: close quietly
            try:
                self.inner.finish()
            except Exception:  # noqa: BLE001 - a tracker must never fail a run
                pass
        self.failed = True  # nothing is logged after finish


class WandbTracker:
    """A W&B run (wandb.init with the run's config) in <run_dir>/wandb. Tables and images go to the
    last step logged (W&B merges them into its row), so the step axis stays the run's steps; before
    any step (a resumed run with nothing left to run) they gather in one row, committed at finish."""

    def __init__(self, run: Any):
        self.run = run
        self.step: int | None = None  # the last step logged

    @classmethod
    def start(cls, project: str, name: str, mode: str, run_dir: Path, run_id: str,
              config: Mapping[str, Any]) -> WandbTracker:
        import wandb

        settings = wandb.Settings(silent=True, console="off")  # fds 1 and 2 are the run's log (run/logs.py)
        run = wandb.init(project=project, name=name, id=run_id, resume="allow", mode=mode,  # type: ignore[arg-type]
                         dir=str(run_dir), config=dict(config), reinit="create_new", settings=settings)
        return cls(run)

    def log_step(self, step: int, metrics: Mapping[str, float]) -> None:
        self.run.log(dict(metrics), step=step)
        self.step = step

    def log_table(self, key: str, columns: Sequence[str], rows: Sequence[Sequence[TableCell]]) -> None:
        import wandb

        self._log({key: wandb.Table(columns=list(columns), data=[list(r) for r in rows])})

    def log_images(self, key: str, paths: Sequence[Path]) -> None:
        import wandb

        self._log({f"{key}/{Path(p).stem}": wandb.Image(str(p)) for p in paths})

    def _log(self, data: dict[str, Any]) -> None:
        if self.step is None:
            self.run.log(data, commit=False)
        else:
            self.run.log(data, step=self.step)

    def log_files(self, name: str, kind: str, paths: Sequence[Path]) -> None:
        import wandb

        artifact = wandb.Artifact(name, type=kind)
        for p in paths:
            artifact.add_file(str(p))
        self.run.log_artifact(artifact)

    def finish(self) -> None:
        self.run.finish()


class WandbSettings(Protocol):
    """What `open_tracker` reads of the config's output.wandb (a WandbSection)."""

    @property
    def project(self) -> str: ...
    @property
    def name(self) -> str | None: ...
    @property
    def mode(self) -> str: ...


def open_tracker(section: WandbSettings | None, run_dir: Path, config: Mapping[str, Any], meta: Meta, warn: Warn) -> SafeTracker | None:
    """The run's tracker (None: none configured, or it could not start, which is a warning).

    `section` is the config's `output.wandb` (a WandbSection or None)."""
    if section is None or section.mode == "disabled":
        return None
    try:
        import wandb
    except ImportError:
        warn("output.wandb is set but wandb is not installed (pip install wandb); the run goes on without W&B")
        return None
    try:
        if section.mode == "online" and not wandb.login(prompt=False, verify=False):
            warn("output.wandb.mode=online but no W&B credentials are set (wandb login, or WANDB_API_KEY); the "
                 "run goes on without W&B (output.wandb.mode=offline keeps a local W&B run to sync later)")
            return None
        run_id = meta.get_meta(RUN_ID_KEY)
        if not isinstance(run_id, str) or not run_id:
            run_id = uuid.uuid4().hex[:12]  # a W&B run id: lower-case letters and digits
            meta.set_meta(RUN_ID_KEY, run_id)
        inner = WandbTracker.start(section.project, section.name or Path(run_dir).name, section.mode,
                                   Path(run_dir), run_id, config)
    except Exception as err:  # noqa: BLE001 - a tracker must never fail a run
        warn(f"W&B did not start ({type(err).__name__}: {err}); the run goes on without W&B")
        return None
    return SafeTracker(inner, warn)


# -- what the end of a run sends -------------------------------------------------------------------

EVAL_COLUMNS = ["step", "set", "harness", "pass@1", "ci95_low", "ci95_high", "passed", "n_tasks", "n_rollouts"]
CHANGE_COLUMNS = ["harness · set", "before", "after", "change", "ci95_low", "ci95_high", "tasks",
                  "rollouts_before", "rollouts_after"]


def eval_rows(records: list[dict[str, Any]]) -> list[list[TableCell]]:
    """One row per eval step, eval set and harness (EVAL_COLUMNS)."""
    rows: list[list[TableCell]] = []
    for step, rec in step_records(records):
        for name, per_harness in ((rec.eval.sets if rec.eval else None) or {}).items():
            for harness, agg in sorted(per_harness.items()):
                ci = agg.get("pass@1_ci95") or [None, None]
                rows.append([step, name, harness, agg.get("pass@1"), ci[0], ci[1], agg.get("passed"),
                             agg.get("n_tasks"), agg.get("n_rollouts")])
    return rows


def change_rows(changes: Sequence[tuple[str, Cell]]) -> list[list[TableCell]]:
    """The held-out change table (report/heldout.py), one row per label (CHANGE_COLUMNS)."""
    return [[label, c.before, c.after, c.change, c.ci95[0], c.ci95[1], c.tasks, c.rollouts_before,
             c.rollouts_after] for label, c in changes]


def summary_tables(records: list[dict[str, Any]], changes: Sequence[tuple[str, Cell]]) -> dict[str, Table]:
    """The tables the end of a run sends (those with rows), under tables/ (apart from the scalars
    eval/<harness>)."""
    tables = {"tables/eval": (EVAL_COLUMNS, eval_rows(records)),
              "tables/held_out_change": (CHANGE_COLUMNS, change_rows(changes)),
              "tables/harness_dynamics": (list(DYNAMICS_COLUMNS), dynamics_rows(records))}
    return {k: v for k, v in tables.items() if v[1]}


def log_run_end(tracker: Tracker | None, records: list[dict[str, Any]], plots: Sequence[Path],
                changes: Sequence[tuple[str, Cell]], pages: Sequence[Path | None]) -> None:
    """The end of a run: tables, plots, and the report and tree pages as one artifact."""
    if tracker is None:
        return
    for key, (columns, rows) in summary_tables(records, changes).items():
        tracker.log_table(key, columns, rows)
    if plots:
        tracker.log_images("plots", plots)
    files = [p for p in pages if p is not None and Path(p).is_file()]
    if files:
        tracker.log_files("run-pages", "run-pages", files)
