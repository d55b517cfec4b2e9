"""The end of a run: plots, the tree page of the last step, report.md/.html and the closing summary
in the terminal (`finish_run`, which returns the `RunResult`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from rich.console import Console

from harnessrl.algo.views import write_tree_page
from harnessrl.profile.run_profile import profile_store
from harnessrl.profile.tables import markdown as profile_markdown
from harnessrl.report.cold_start import cold_start_lines
from harnessrl.report.display import changes_table, summary_table
from harnessrl.report.heldout import changes_markdown, headline_cells, held_out_changes
from harnessrl.report.metrics_log import read_jsonl
from harnessrl.report.run_report import write_plots, write_report
from harnessrl.report.tracking import log_run_end
from harnessrl.tree.decode import load_decoder

if TYPE_CHECKING:
    from harnessrl.run.open_run import RunParts


@dataclass
class RunResult:
    run_dir: Path
    report: Path
    plots_dir: Path
    last_step: int
    records: list[dict[str, Any]]  # the step records as stored (StepRecord.to_json), with "step"


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
                          changes_markdown(changes),
                          cold_start_lines(parts.run_dir) + profile_markdown(profile_store(parts.store)),
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
