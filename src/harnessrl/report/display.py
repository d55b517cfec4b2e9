"""What a run shows in the terminal: live progress on a TTY, one line per step, a closing summary.

On a terminal, a live block (rich) shows the current step and phase with the run's ETA and one bar
per harness (rollouts done / total). Off a terminal (CI, `nohup`, `| tee`) nothing live is drawn:
each phase that runs rollouts (evals, the step's rollouts, branch waves) and the update print plain
lines instead, at the start, at least every `plain_every_s` seconds and at the end (done/total,
statuses so far, rate: harnessrl/plain_progress.py); the other phases print only when they run
longer than that. Each step prints one line. Both end with `summary_table` (held-out pass@1
before/after per harness, wall time per phase, where the outputs are).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from rich.console import Console, RenderableType
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)
from rich.table import Table
from rich.text import Text

from harnessrl.plain_progress import PlainProgress
from harnessrl.report.heldout import change_text
from harnessrl.report.record import step_records
from harnessrl.report.run_report import eval_table
from harnessrl.report.transfer import Cell

if TYPE_CHECKING:
    from rich.progress import Task

    from harnessrl.rollout.plan import GroupPlan

PHASES = ("rollout", "branch", "tree", "train", "sync", "eval", "checkpoint")
ANNOUNCED = ("train",)  # phases (by the start of their name) whose plain lines start at once, like rollouts'


class _Bars(ProgressColumn):
    """A column shown for the per-harness bars only (the header line has no total)."""

    def __init__(self, inner: ProgressColumn):
        super().__init__()
        self.inner = inner

    def render(self, task: Task) -> RenderableType:
        return self.inner.render(task) if task.total is not None else Text("")


class RunDisplay:
    """Live progress of a run (a context manager); inert when the console is not a terminal."""

    def __init__(self, console: Console, total_steps: int, first_step: int, plain_every_s: float = 30.0):
        self.console = console
        self.plain_every_s = plain_every_s
        self._plain: PlainProgress | None = None  # off a terminal: the lines of the phase that runs
        self.total_steps = total_steps
        self.first_step = first_step
        self.step_times: list[float] = []
        bars = [_Bars(c) for c in (BarColumn(bar_width=30), MofNCompleteColumn(), TimeElapsedColumn(),
                                   TextColumn("eta"), TimeRemainingColumn())]
        # library output must not be pulled into the live block: it goes to run.log (run/logs.py)
        self._progress = Progress(TextColumn("{task.description}"), *bars, console=console, transient=True,
                                  disable=not console.is_terminal, redirect_stdout=False, redirect_stderr=False)
        self._header = self._progress.add_task("starting", total=None, start=False)
        self._step, self._phase = 0, "starting"

    def __enter__(self) -> "RunDisplay":
        self._progress.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._end_plain()
        self._progress.__exit__(*exc)

    @property
    def plain(self) -> bool:
        """Whether progress goes out as plain lines (the console is not a terminal)."""
        return not self.console.is_terminal

    def _print_plain(self, line: str) -> None:
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def _start_plain(self, name: str, total: int | None, quiet: bool) -> None:
        self._end_plain()
        if self.plain:
            self._plain = PlainProgress(name, self._print_plain, total, self.plain_every_s, quiet=quiet)
            self._plain.start()

    def _end_plain(self) -> None:
        if self._plain is not None:
            self._plain.finish()
            self._plain = None

    def _where(self, step: int) -> str:
        return "baseline eval" if step == 0 else f"step {step}/{self.total_steps}"

    def eta_s(self) -> float | None:
        """Seconds left: mean step time so far x steps left (None before the first step ends)."""
        if not self.step_times:
            return None
        left = self.total_steps - self._step + (1 if self._phase != "done" else 0)
        return max(0.0, sum(self.step_times) / len(self.step_times) * left)

    def phase(self, step: int, name: str) -> None:
        self._step, self._phase = step, name
        eta = self.eta_s()
        where = self._where(step)
        text = f"[bold]{where}[/bold] · {name}" + (f" · run ETA {_hms(eta)}" if eta is not None else "")
        self._progress.update(self._header, description=text)
        self._start_plain(f"{where} · {name}", None, quiet=not name.startswith(ANNOUNCED))

    def rollouts(self, plans: Sequence[GroupPlan]) -> tuple[Callable[..., None], Callable[[], None]]:
        """(advance(n, harness=None, status=None), close) for one batch of planned groups: a bar per
        harness, or off a terminal plain lines for the batch (done/total, statuses, rate)."""
        totals: dict[str, int] = {}
        for p in plans:
            totals[p.harness] = totals.get(p.harness, 0) + p.n
        bars = {h: self._progress.add_task(f"  {h}", total=n) for h, n in totals.items()}
        first = next(iter(bars.values()), None)
        self._start_plain(f"{self._where(self._step)} · {self._phase}", sum(totals.values()), quiet=False)
        plain = self._plain

        def advance(n: int = 1, harness: str | None = None, status: str | None = None) -> None:
            bar = bars.get(harness) if harness is not None else first
            if bar is None and harness is not None:  # a record names the harness, a plan may add :profile
                bar = next((b for h, b in bars.items() if h.split(":")[0] == harness), first)
            if bar is not None:
                self._progress.advance(bar, n)
            if plain is not None:
                plain.advance(n, status)

        def close() -> None:
            for bar in bars.values():
                self._progress.remove_task(bar)
            if plain is not None and plain is self._plain:
                self._end_plain()

        return advance, close

    def step_done(self, step: int, seconds: float, line: str) -> None:
        self._end_plain()
        self.step_times.append(seconds)
        self.console.print(line)


def summary_table(records: list[dict[str, Any]], run_dir: Path, report: Path, plots_dir: Path,
                  log_file: Path | None, trees: Path | None = None) -> Table:
    """Held-out pass@1 before/after per harness, wall time per phase, and where the outputs are."""
    before, after = eval_table(records)
    table = Table(title=f"run {run_dir.name}", show_header=True, header_style="bold", title_justify="left")
    table.add_column("")
    table.add_column("before", justify="right")
    table.add_column("after", justify="right")
    table.add_column("change", justify="right")
    for h in sorted(set(before) | set(after)):
        b, a = before.get(h), after.get(h)
        change = f"{100 * (a - b):+.1f} pts" if a is not None and b is not None else "-"
        table.add_row(f"pass@1 {h}", _pct(b), _pct(a), change)
    totals = {k: sum(float(rec.time.get(k, 0.0)) for _, rec in step_records(records)) for k in PHASES}
    spent = sum(totals.values())
    table.add_section()
    table.add_row("wall time", "", _hms(spent), "")
    for k, v in totals.items():
        if v > 0:
            table.add_row(f"  {k}", "", _hms(v), f"{100 * v / spent:.0f}%" if spent else "")
    table.add_section()
    ckpts = run_dir / "checkpoints"
    for name, path in (("report", report), ("plots", plots_dir), ("checkpoints", ckpts), ("trees", trees),
                       ("library logs", log_file)):
        if path is not None:
            table.add_row(name, str(path), "", "")
    return table


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _hms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def now() -> float:
    return time.perf_counter()


def changes_table(changes: list[tuple[str, Cell]]) -> Table:
    """What training changed: held-out pass@1 before/after with the paired 95% interval (report/heldout.py)."""
    table = Table(title="held-out change (paired 95% CI over tasks; outside the noise when it excludes 0)",
                  show_header=True, header_style="bold", title_justify="left")
    for name, justify in (("harness · set", "left"), ("before", "right"), ("after", "right"),
                          ("change [95% CI]", "right"), ("tasks", "right"), ("rollouts", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for label, c in changes:
        style = "bold green" if c.ci95[0] > 0 else "bold red" if c.ci95[1] < 0 else ""
        table.add_row(label, _pct(c.before), _pct(c.after), f"[{style}]{change_text(c)}[/{style}]" if style
                      else change_text(c), str(c.tasks), f"{c.rollouts_before} / {c.rollouts_after}")
    return table
