"""Per-step metrics: the run store's steps table is the record; JSONL, TensorBoard and an
experiment tracker (report/tracking.py, output.wandb) mirror it.

Every number of a step's record becomes a scalar (`flatten_metrics`: `reward/builtin`,
`informative_groups`, `dropped_groups/all_fail`, `dynamics/codex/calls_per_rollout`, ...). In
TensorBoard the sampler's picks also show as a histogram of the picked tasks' estimated pass rates
(`sampler_picks/p`) and, with the groups dynamic sampling dropped, as text (`sampler_picks`,
`dropped_groups`).

On resume the JSONL file is rewritten from the store, so it never holds a step twice; the tracker
only gets the steps logged from then on.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harnessrl.report.tracking import Tracker


def flatten_metrics(metrics: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """{"reward": {"builtin": 0.5}} -> {"reward/builtin": 0.5}; non-numbers dropped."""
    out: dict[str, float] = {}
    for k, v in metrics.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten_metrics(v, key + "/"))
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            out[key] = float(v)
    return out


class MetricsLog:
    """Appends one JSON line per step, writes TensorBoard scalars (when enabled) and sends the
    scalars to the tracker (when one is configured; closing the log finishes it)."""

    def __init__(self, run_dir: Path, tensorboard: bool = True, tracker: Tracker | None = None):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.tracker = tracker
        self._tb = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            self._tb = SummaryWriter(str(Path(run_dir) / "tensorboard"))

    def rewrite(self, steps: list[tuple[int, dict[str, Any]]]) -> None:
        """Replace the JSONL file with the store's step records (after a resume)."""
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as fh:
            for step, m in sorted(steps):
                fh.write(json.dumps({"step": step, **m}) + "\n")
        tmp.replace(self.path)

    def amend(self, step: int, metrics: dict[str, Any], steps: list[tuple[int, dict[str, Any]]]) -> None:
        """A recorded step's record changed (the closing eval of a cut-short run): the JSONL file is
        rewritten from the store's `steps`, the tracker gets the step's scalars again."""
        self.rewrite(steps)
        if self.tracker is not None:
            self.tracker.log_step(step, flatten_metrics(metrics))

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        with open(self.path, "a") as fh:
            fh.write(json.dumps({"step": step, **metrics}) + "\n")
        scalars = flatten_metrics(metrics)
        if self._tb is not None:
            for k, v in scalars.items():
                self._tb.add_scalar(k, v, step)
            self._sampling(step, metrics)
            self._tb.flush()
        if self.tracker is not None:
            self.tracker.log_step(step, scalars)

    def _sampling(self, step: int, metrics: dict[str, Any]) -> None:
        """The sampler's picks (estimated pass rates, and which tasks) and the dropped groups."""
        assert self._tb is not None
        picks = [p for p in metrics.get("sampler_picks") or () if isinstance(p, dict)]
        rates = [float(p["p"]) for p in picks if isinstance(p.get("p"), (int, float))]
        if rates:
            import numpy as np

            self._tb.add_histogram("sampler_picks/p", np.asarray(rates), step, bins=np.linspace(0.0, 1.0, 11))
        if picks:
            self._tb.add_text("sampler_picks", rows_markdown(picks), step)
        dropped = [d for d in metrics.get("dropped_log") or () if isinstance(d, dict)]
        if dropped:
            self._tb.add_text("dropped_groups", rows_markdown(dropped), step)

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()
        if self.tracker is not None:
            self.tracker.finish()


def rows_markdown(rows: list[dict[str, Any]]) -> str:
    """A markdown table of dicts with the same keys (the sampler's picks, the dropped groups)."""
    keys = list(dict.fromkeys(k for r in rows for k in r))
    cell = lambda v: f"{v:.3f}" if isinstance(v, float) else str(v)  # noqa: E731
    return "\n".join(["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
                     + ["| " + " | ".join(cell(r.get(k, "")) for k in keys) + " |" for r in rows])


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    path = Path(path)
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
