"""Per-step metrics: the run store's steps table is the record; JSONL and TensorBoard mirror it.

On resume the JSONL file is rewritten from the store, so it never holds a step twice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


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
    """Appends one JSON line per step and writes TensorBoard scalars (when enabled)."""

    def __init__(self, run_dir: Path, tensorboard: bool = True):
        self.path = Path(run_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
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

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        with open(self.path, "a") as fh:
            fh.write(json.dumps({"step": step, **metrics}) + "\n")
        if self._tb is not None:
            for k, v in flatten_metrics(metrics).items():
                self._tb.add_scalar(k, v, step)
            self._tb.flush()

    def close(self) -> None:
        if self._tb is not None:
            self._tb.close()


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    path = Path(path)
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
