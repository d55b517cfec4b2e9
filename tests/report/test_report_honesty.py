"""What the report, the step line, the tree page and the weight-sync log print is what was
computed (issue 41, item 4): the headline table carries the paired intervals, no KL to a reference
model that was never used, a k3 KL never prints as "-0.0000", trees.html's advantage column is
filled, the weight sync sends the checkpoint's tensors and no rotary buffer, and vLLM's per-sync
rotary warning becomes one explained line."""

from __future__ import annotations

import logging
import re
from dataclasses import replace

from harnessrl.algo.estimator import EstimatorOnly, estimate
from harnessrl.engine.vllm_worker import RotaryReloadNote, note_rotary_reload
from harnessrl.report.heldout import headline_cells
from harnessrl.run.loop import step_line
from harnessrl.report.record import StepRecord, UpdateStats
from harnessrl.report.run_report import _series, kl_text, panel_title, write_report
from harnessrl.report.transfer import Cell
from harnessrl.train.update_stats import TokenSums
from harnessrl.tree.build import build_tree
from harnessrl.tree.view_html import tree_html
from tests.support.synthetic import conversation_calls, make_rollout

RECORDS = [{"step": 0, "eval": {"claude-code": 0.2, "codex": 0.5}, "policy_version": 0, "time": {}},
           {"step": 1, "eval": {"claude-code": 0.35, "codex": 0.6}, "policy_version": 1, "time": {"train": 1.0},
            "loss": 0.1, "entropy": 2.0, "mismatch_kl": -2e-9, "tokens_trained": 5.0, "grad_norm": 1.0,
            "tokens_computed": 5.0, "unique_tree_tokens": 5.0, "chunks": 1.0}]


def cell(change: float, lo: float, hi: float) -> Cell:
    return Cell(before=0.2, after=0.2 + change, change=change, ci95=(lo, hi), tasks=20, rollouts_before=60,
                rollouts_after=60)


def test_the_headline_table_carries_the_paired_intervals(tmp_path):
    changes = [("claude-code · test", cell(0.15, -0.017, 0.30)), ("codex · test", cell(0.10, 0.02, 0.2)),
               ("claude-code · paraphrase", cell(0.0, -0.1, 0.1)), ("all harnesses · test", cell(0.1, 0.0, 0.2))]
    paired = headline_cells(changes, {"tasks": {"eval_sets": ["test", {"name": "paraphrase"}]}})
    assert set(paired) == {"claude-code", "codex"} and paired["claude-code"].ci95 == (-0.017, 0.30)
    md = write_report(RECORDS, tmp_path, [], "t", "a: 1", paired=paired).read_text()
    headline = md[md.index("## Held-out pass@1 per harness"):].split("\n\n")[1]
    assert "change [95% CI, paired over tasks]" in headline
    assert "| claude-code | 20.0% | 35.0% | +15.0 pts [-1.7, +30.0] |" in headline
    assert "| codex | 50.0% | 60.0% | +10.0 pts [+2.0, +20.0] |" in headline
    assert "+15.0 pts [-1.7, +30.0]" in (tmp_path / "report.html").read_text()


def test_no_kl_to_a_reference_model_that_was_never_used():
    sums = TokenSums(kl=0.0, mismatch_kl=1e-3, entropy=2.0, weight=1.0, tokens=4.0, added=1)
    kw = dict(grad_norm=1.0, tokens_computed=4.0, unique_tree_tokens=4.0, chunks=1.0)
    without = UpdateStats.from_sums(sums, 1, kl_computed=False, **kw)
    assert without.kl is None and UpdateStats.from_sums(sums, 1, **kw).kl == 0.0
    row = StepRecord(policy_version=1, update=without).to_json()
    assert "kl" not in row and "entropy" in row
    series = {**_series([{"step": 1, **row}], "kl"), **_series([{"step": 1, **row}], "entropy")}
    assert set(series) == {"entropy"}
    assert "KL" not in panel_title("kl_entropy", "KL to reference / entropy", series).replace("no KL", "")
    assert panel_title("kl_entropy", "KL to reference / entropy", {"kl": 1, "entropy": 1}) == "KL to reference / entropy"
    assert " kl " not in step_line(1, StepRecord(policy_version=1, update=without))


def test_a_k3_kl_never_prints_as_minus_zero(tmp_path):
    assert kl_text(-0.0) == kl_text(-3e-9) == kl_text(0.0) == "0.0000" and kl_text(0.01234) == "0.0123"
    assert kl_text(None) == "-"
    line = step_line(1, StepRecord(policy_version=1, update=UpdateStats(kl=-1e-12, mismatch_kl=-2e-9, loss=0.1)))
    assert "-0.0000" not in line and "mismatch KL 0.0000" in line and "kl 0.0000" in line
    md = write_report(RECORDS, tmp_path, [], "t", "a: 1").read_text()
    assert "mismatch KL(engine||trainer): first 0.0000" in md and "-0.0000" not in md


def test_the_trees_page_fills_the_advantage_column_for_every_estimator():
    rewards = {"r0": 1.0, "r1": 0.0, "r2": 0.0}
    rollouts = [replace(make_rollout(r, w), sample_idx=i) for i, (r, w) in enumerate(rewards.items())]
    calls = [c for i, r in enumerate(rewards) for c in conversation_calls(r, [1, 2, 3], [([10 + i, 11], [7])] * 2)]
    tree = build_tree(calls, rollouts)
    for name in ("grpo", "tree_grpo"):
        page = tree_html(tree, lambda ids: " ".join(map(str, ids)), estimate(tree, EstimatorOnly(name)))
        table = page[page.index("<th>rollout</th>"):page.index("</table>", page.index("<th>rollout</th>"))]
        assert 'title="grpo: the rollout' in table  # the header says what the number is
        rows = re.findall(r"<tr><td>(r\d)</td>(.*?)</tr>", table)
        adv = {r: float(re.findall(r"<td>([^<]*)</td>", cells)[6]) for r, cells in rows}
        assert set(adv) == set(rewards), name
        assert adv["r0"] > 0 > adv["r1"] and adv["r1"] == adv["r2"], name


def test_the_weight_sync_sends_the_checkpoint_tensors_and_no_rotary_buffer():
    import pytest

    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from harnessrl.train.weight_sync import rank_served_weights, send_weights
    from harnessrl.train.weights import hf_named_weights

    config = transformers.LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                      num_attention_heads=2, num_key_value_heads=2, tie_word_embeddings=True)
    model = transformers.LlamaForCausalLM(config)
    assert any("inv_freq" in n for n, _ in model.named_buffers())  # the rotary buffer exists ...

    class Source:
        compute_dtype = torch.bfloat16

        def named_weights(self):
            return hf_named_weights(model)

    class FakeEngine:
        sent: list = []

        def update_weights(self, named_tensors, version):
            self.sent = [n for n, _ in named_tensors]

    engine = FakeEngine()
    send_weights(engine, rank_served_weights(Source(), on_cpu=True), 1)
    params = {n for n, _ in model.named_parameters()} | {"lm_head.weight"}  # tied: sent under both names
    assert set(engine.sent) == set(model.state_dict()) and set(engine.sent) <= params
    assert not {n for n, _ in model.named_buffers()} & set(engine.sent)  # ... and is never sent


def test_vllm_rotary_reload_warning_becomes_one_explained_line():
    logger = logging.getLogger("harnessrl.test.reload")
    logger.propagate = False
    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    try:
        note_rotary_reload(logger)
        note_rotary_reload(logger)  # once per process
        assert sum(isinstance(f, RotaryReloadNote) for f in logger.filters) == 1
        for _ in range(3):  # three syncs
            logger.warning("%s: Failed to load weights", "RotaryEmbedding")
        logger.warning("%s: Failed to load weights", "QKVParallelLinear")  # a real failure stays a warning
    finally:
        logger.removeHandler(handler)
        logger.filters.clear()
    assert len(seen) == 2
    assert "cos_sin_cache" in seen[0].getMessage() and seen[0].levelno == logging.INFO
    assert seen[1].getMessage() == "QKVParallelLinear: Failed to load weights" and seen[1].levelno == logging.WARNING


def test_the_report_scores_the_difficulty_estimate_against_a_constant():
    from harnessrl.report.sampling import sampling_lines

    picks = [{"group": f"g{i}", "task": f"t{i}", "harness": "h", "p": 0.5, "weight": 0.5, "n": 4, "p_mixed": pm,
              "mixed": y} for i, (pm, y) in enumerate([(0.9, True), (0.1, False), (0.8, True), (0.2, False)])]
    rec = {"step": 1, "policy_version": 1, "time": {}, "informative_groups": 0.5, "sampled_informative": 0.5,
           "groups_sampled": 4.0, "extra_groups": 0.0, "wasted_rollouts": 8.0, "rollouts_sampled": 16.0,
           "pick_pass_rate": 0.5, "sampler_picks": picks}
    text = "\n".join(sampling_lines([rec]))
    assert "| P(mixed) at the pick (the sampler's estimate) | 0.025 |" in text  # (0.1^2 + 0.1^2 + 0.2^2 + 0.2^2) / 4
    assert "| constant: the run's mixed share, 0.50 (known once the run ended) | 0.250 |" in text
    assert "| constant: the mixed share of the steps before the pick's | 0.250 |" in text  # 0.5 at the first step
    assert "| the pick's p as a point estimate, 1 - p^n - (1 - p)^n | 0.391 |" in text  # (7/8 - y)^2, half mixed
    assert "is better than the run's mixed share as a constant, and better than the mixed share" in text
