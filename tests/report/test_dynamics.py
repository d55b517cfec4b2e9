"""Harness dynamics from a constructed step (calls, tokens, context, failure modes, trained share),
the report's "Informative groups" and "Harness dynamics" sections with their plots, and the
sampling stats in TensorBoard."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from harnessrl.rollout.groups import PlannedGroup
from harnessrl.rollout.plan import GroupPlan
from harnessrl.report.dynamics import DYNAMICS_COLUMNS, dynamics_rows, harness_dynamics, shown_steps
from harnessrl.report.metrics_log import MetricsLog
from harnessrl.report.record import SamplingStats, StepRecord
from harnessrl.report.run_report import write_plots, write_report
from harnessrl.store.records import PROMPT, CallRecord, RolloutRecord
from harnessrl.tree.build import build_tree
from harnessrl.tree.filters import FilterConfig


@dataclass(frozen=True)
class Task:
    id: str


def call(rid: str, seq: int, prompt: list[int], sampled: list[int], finish: str = "stop", status: str = "ok",
         meta: dict | None = None) -> CallRecord:
    return CallRecord(call_id=f"{rid}-c{seq}", rollout_id=rid, seq=seq, protocol="openai.chat", prompt_ids=prompt,
                      sampled_ids=sampled, logprobs=[-0.5] * len(sampled), prompt_provenance=[PROMPT] * len(prompt),
                      policy_version=0, temperature=1.0, top_p=1.0, finish_reason=finish, status=status,
                      meta=meta or {})


def rollout(rid: str, harness: str, group: str, reward: float | None, status: str = "ok", idx: int = 0):
    return RolloutRecord(rollout_id=rid, task_id="t0", harness=harness, group_id=group, status=status, reward=reward,
                         step=1, sample_idx=idx)


def constructed_step() -> tuple[list[PlannedGroup], PlannedGroup]:
    """Group a (harness "cc"): a0 two served calls (the second cut at the token limit), a1 one served
    call and one refused as too long, a2 a branch of a0 (its first call replayed, then one sampled);
    group b (harness "codex"): one timeout, one ok, one call each."""
    p0 = list(range(1, 11))
    a_calls = [call("a0", 0, p0, [20, 21, 22]), call("a0", 1, p0 + [20, 21, 22, 30, 31], [40, 41], finish="length"),
               call("a1", 0, p0, [50, 51, 52, 53]),
               call("a1", 1, p0 + [50, 51, 52, 53] * 10, [], status="error", meta={"error_kind": "too_long"}),
               call("a2", 0, p0, [20, 21, 22], meta={"replay": {"of": "a0-c0"}}),
               call("a2", 1, p0 + [20, 21, 22, 60], [61, 62])]
    a = PlannedGroup(GroupPlan("g0", Task("t0"), "cc", 2, "train", 1),
                     [rollout("a0", "cc", "g0", 1.0), rollout("a1", "cc", "g0", 0.0, idx=1),
                      rollout("a2", "cc", "g0", 1.0, idx=2)], a_calls)
    b = PlannedGroup(GroupPlan("g1", Task("t0"), "codex", 2, "train", 1),
                     [rollout("b0", "codex", "g1", 0.0, status="timeout"), rollout("b1", "codex", "g1", 0.0, idx=1)],
                     [call("b0", 0, list(range(8)), [9, 9, 9, 9, 9]), call("b1", 0, list(range(8)), [7])])
    return [a, b], a


def test_dynamics_of_a_constructed_step():
    groups, trained = constructed_step()
    tree = build_tree(trained.calls, trained.rollouts, FilterConfig(truncated="keep"))
    d = harness_dynamics(groups, [tree])
    cc, codex = d["cc"], d["codex"]
    assert cc["rollouts"] == 3 and cc["calls_per_rollout"] == pytest.approx(5 / 3)  # the refused call is not served
    assert cc["prompt_tokens_per_call"] == pytest.approx((10 + 15 + 10 + 10 + 14) / 5)
    assert cc["completion_tokens_per_call"] == pytest.approx(14 / 5)
    assert cc["completion_tokens_per_rollout"] == pytest.approx(14 / 3)
    assert cc["context_mean"] == pytest.approx((17 + 14 + 16) / 3) and cc["context_max"] == 17
    assert cc["status"] == {"ok": 3.0} and cc["call_errors"] == {"too_long": 1.0} and cc["truncated_calls"] == 1
    assert cc["replayed_calls"] == 1 and cc["tokens_sampled"] == 14 - 3  # the replayed answer was a0's
    assert cc["tokens_trained"] == tree.stats.decision_tokens == 11
    assert cc["trained_share"] == 1.0 and cc["tree_share"] == pytest.approx(11 / tree.stats.unique_tokens)
    assert codex["status"] == {"ok": 1.0, "timeout": 1.0} and codex["call_errors"] == {}
    assert codex["tokens_sampled"] == 6 and codex["trained_share"] == 0.0  # its uniform group did not train

    rec = StepRecord(policy_version=1, dynamics=d)
    row = {"step": 1, **rec.to_json()}
    assert StepRecord.from_json(row).dynamics == d  # survives the store (a resume)
    rows = dynamics_rows([row])
    assert [r[:2] for r in rows] == [[1, "cc"], [1, "codex"]] and len(rows[0]) == len(DYNAMICS_COLUMNS)
    assert rows[1][DYNAMICS_COLUMNS.index("statuses")] == "ok 1, timeout 1"


def test_shown_steps_keep_first_and_last():
    assert shown_steps(list(range(1, 31)), most=5) == [1, 8, 15, 23, 30]
    assert shown_steps([3, 1, 2]) == [1, 2, 3]


def sampling(step: int, informative: float, dropped: dict[str, float]) -> SamplingStats:
    return SamplingStats(informative_groups=informative, sampled_informative=informative * 0.8, groups_sampled=5,
                         extra_groups=1, wasted_rollouts=8.0 * step, rollouts_sampled=40, pick_pass_rate=0.4,
                         dropped_groups=dropped,
                         sampler_picks=[{"group": f"s{step}-a1-g{i}", "task": f"t{i}", "harness": "cc", "p": 0.1 * i,
                                         "weight": 0.2} for i in range(8)],
                         dropped_log=[{"group": f"s{step}-a1-g0", "task": "t0", "harness": "cc", "reason": r,
                                       "rollouts": 8} for r, n in dropped.items() for _ in range(int(n))])


def run_records() -> list[dict]:
    groups, trained = constructed_step()
    tree = build_tree(trained.calls, trained.rollouts, FilterConfig(truncated="keep"))
    recs = [{"step": 0, **StepRecord(policy_version=0).to_json()}]
    for step, (inf, dropped) in enumerate([(0.5, {"all_fail": 2.0}), (1.0, {})], start=1):
        rec = StepRecord(policy_version=step, sampling=sampling(step, inf, dropped),
                         dynamics=harness_dynamics(groups, [tree]))
        recs.append({"step": step, **rec.to_json()})
    return recs


def test_the_report_has_the_informative_groups_and_harness_dynamics_sections(tmp_path):
    records = run_records()
    plots = write_plots(records, tmp_path / "plots")
    stems = {p.stem for p in plots}
    assert {"informative", "wasted_rollouts", "harness_dynamics"} <= stems
    md = write_report(records, tmp_path, plots, "t", "a: 1").read_text()
    sec = md[md.index("## Informative groups"):md.index("## Harness dynamics")]
    assert "Over 2 steps: 75% of the batch informative on average, 24 of 80 rollouts without contrast, " \
           "dropped groups: all_fail 2." in sec
    assert "| 1 | 50% | 40% | 5 (+1) | 8 / 40 | all_fail 2 | 0.40 | - | t0 (cc) p=0.00, " in sec
    assert "+2 more |" in sec and "| 2 | 100% |" in sec
    assert "![informative](plots/informative.png)" in sec and "![wasted_rollouts](plots/wasted_rollouts.png)" in sec
    dyn = md[md.index("## Harness dynamics"):]
    assert "| cc | 1 | 3 | 1.67 | 12 | 5 | 16 / 17 | ok 3 | too_long 1 | 1 | 100.0% |" in dyn
    assert "| codex | 2 | 2 | 1.00 |" in dyn and "ok 1, timeout 1" in dyn
    assert "![harness_dynamics](plots/harness_dynamics.png)" in dyn
    for stem in stems:  # each plot once: the sections' plots are not repeated under "Plots"
        assert md.count(f"(plots/{stem}.png)") == 1, stem
    html = (tmp_path / "report.html").read_text()
    assert "<h2>Informative groups</h2>" in html and "<h2>Harness dynamics (training rollouts per step)</h2>" in html
    assert "alt='harness_dynamics'" in html


def test_a_run_without_sampling_or_dynamics_has_neither_section(tmp_path):
    records = [{"step": 0, **StepRecord(policy_version=0).to_json()}, {"step": 1, **StepRecord(policy_version=1).to_json()}]
    md = write_report(records, tmp_path, write_plots(records, tmp_path / "plots"), "t", "a: 1").read_text()
    assert "## Informative groups" not in md and "## Harness dynamics" not in md


def test_tensorboard_holds_the_sampling_stats_and_the_picks(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    log = MetricsLog(tmp_path, tensorboard=True)
    for rec in run_records():
        log.log(rec["step"], {k: v for k, v in rec.items() if k != "step"})
    log.close()
    acc = EventAccumulator(str(tmp_path / "tensorboard"), size_guidance={"tensors": 0, "histograms": 0})
    acc.Reload()
    scalars = set(acc.Tags()["scalars"])
    assert {"informative_groups", "wasted_rollouts", "pick_pass_rate", "dropped_groups/all_fail",
            "dynamics/cc/calls_per_rollout", "dynamics/codex/trained_share"} <= scalars
    assert [(e.step, e.value) for e in acc.Scalars("wasted_rollouts")] == [(1, 8.0), (2, 16.0)]
    assert [e.step for e in acc.Histograms("sampler_picks/p")] == [1, 2]
    hist = acc.Histograms("sampler_picks/p")[0].histogram_value
    assert hist.num == 8 and hist.max == pytest.approx(0.7)
    texts = set(acc.Tags()["tensors"])
    assert {"sampler_picks/text_summary", "dropped_groups/text_summary"} <= texts
    assert [e.step for e in acc.Tensors("dropped_groups/text_summary")] == [1]  # step 2 dropped none
