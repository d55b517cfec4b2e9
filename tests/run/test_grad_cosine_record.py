"""The per-harness gradient cosine of a mixed step: stored, read back, printed, plotted, reported."""

from __future__ import annotations

from types import SimpleNamespace

from harnessrl.config import load_config
from harnessrl.run.loop import harness_ordered, step_line
from harnessrl.report.metrics_log import flatten_metrics
from harnessrl.report.record import StepRecord, UpdateStats
from harnessrl.report.run_report import write_plots, write_report

PAIR = "claude-code:tiny|codex:small"


def mixed_step(cosine: float) -> StepRecord:
    return StepRecord(policy_version=1, time={"train": 1.0},
                      update=UpdateStats(loss=-0.1, tokens_trained=4, grad_norm=2.0,
                                         grad_cosine={PAIR: cosine},
                                         harness_grad_norm={"claude-code:tiny": 1.5, "codex:small": 0.7}))


def test_the_step_record_round_trips_the_cosine_and_the_norms():
    row = mixed_step(-0.25).to_json()
    assert row["grad_cosine"] == {PAIR: -0.25} and row["harness_grad_norm"]["codex:small"] == 0.7
    back = StepRecord.from_json(row)
    assert back == mixed_step(-0.25)
    single = StepRecord(policy_version=1, update=UpdateStats(loss=0.0)).to_json()
    assert "grad_cosine" not in single and "harness_grad_norm" not in single
    assert flatten_metrics(row)[f"grad_cosine/{PAIR}"] == -0.25  # the TensorBoard scalar


def test_the_step_line_shows_the_cosine_of_each_pair():
    assert f"grad cos {PAIR}=-0.25" in step_line(1, mixed_step(-0.25))
    assert "grad cos" not in step_line(1, StepRecord(policy_version=1, update=UpdateStats()))


def test_the_run_plots_and_reports_the_cosine_per_step_and_pair(tmp_path):
    records = [{"step": s, **mixed_step(c).to_json()} for s, c in ((1, 0.5), (2, -0.1))]
    plots = write_plots(records, tmp_path / "plots")
    names = {p.name for p in plots}
    assert {"grad_cosine.png", "grad_norm.png"} <= names
    assert (tmp_path / "plots" / "grad_cosine.png").stat().st_size > 0
    md = write_report(records, tmp_path, plots, "run x", "a: 1\n").read_text()
    assert f"mean cosine over the 2 of 2 steps that trained two harnesses or more: {PAIR} +0.200" in md
    plain = [{"step": 1, **StepRecord(policy_version=1, update=UpdateStats(loss=0.0)).to_json()}]
    assert "grad_cosine.png" not in {p.name for p in write_plots(plain, tmp_path / "plain")}


def test_trees_of_one_harness_go_together_in_their_order():
    trees = [SimpleNamespace(harness=h, n=i) for i, h in enumerate(["b", "a", "b", "a"])]
    ordered, advs = harness_ordered(trees, ["A0", "A1", "A2", "A3"])  # type: ignore[arg-type]
    assert [(t.harness, t.n) for t in ordered] == [("a", 1), ("a", 3), ("b", 0), ("b", 2)]
    assert advs == ["A1", "A3", "A0", "A2"]


def test_the_setting_is_on_by_default_and_can_be_turned_off():
    assert load_config(None, []).algorithm.harness_grad_cosine is True
    assert load_config(None, ["algorithm.harness_grad_cosine=false"]).algorithm.harness_grad_cosine is False
