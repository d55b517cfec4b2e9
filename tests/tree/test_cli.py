"""`harnessrl tree show / stats` on a real run store (SQLite) filled with synthetic groups."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import typer
from typer.testing import CliRunner

from harnessrl.store import RunStore
from harnessrl.tree import build_tree, sum_stats
from harnessrl.app.tree import register
from tests.support.synthetic import claude_code_group, make_call


@pytest.fixture()
def app():
    app = typer.Typer()
    register(app)

    @app.callback()
    def main() -> None:  # keeps `tree` a sub-command group
        pass

    return app


@pytest.fixture()
def run_dir(tmp_path):
    groups = []
    for g in range(2):
        calls, rollouts = claude_code_group(3, 40, 3, completion_tokens=(3, 8), observation_tokens=(2, 6),
                                            vocab=2000, seed=g, group_id=f"g{g}")
        rollouts = [replace(r, task_id="t1" if g == 0 else "t2") for r in rollouts]
        rollouts[2] = replace(rollouts[2], status="timeout", reward=None)
        calls.append(make_call(rollouts[0].rollout_id, 0, calls[0].prompt_ids, calls[0].sampled_ids,
                               call_id=f"g{g}-dup"))  # a harness retry of the same request
        groups.append((calls, rollouts))
    with RunStore(tmp_path) as store:
        for calls, rollouts in groups:
            store.insert_calls(calls)
            for r in rollouts:
                store.put_rollout(r)
    return tmp_path, groups


def test_stats_json_sums_the_run(app, run_dir):
    path, groups = run_dir
    out = CliRunner().invoke(app, ["tree", "stats", str(path), "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    expected = sum_stats(build_tree(c, r).stats for c, r in groups).to_dict()
    for key in ("unique_tokens", "decision_tokens", "per_call_tokens", "per_rollout_tokens", "branches",
                "merged_duplicates", "filtered"):
        assert d[key] == expected[key], key
    assert d["trees"] == 2 and d["merged_duplicates"] == 2
    assert d["filtered"]["abnormal_rollouts"] == 2
    assert d["per_call_tokens"] > d["unique_tokens"]


def test_stats_leave_out_the_abandoned_attempt_of_a_resumed_step(app, tmp_path):
    """Issue 12: step 3 crashed in attempt 1 and was redone in attempt 2; only attempt 2 trained."""
    groups = {}
    for gid, seed in (("s2-a1-g0", 0), ("s3-a1-g0", 1), ("s3-a2-g0", 2), ("eval-s3-a1-builtin-0", 3),
                      ("eval-s3-a2-builtin-0", 4)):
        groups[gid] = claude_code_group(2, 20, 2, completion_tokens=(3, 6), observation_tokens=(2, 4),
                                        vocab=500, seed=seed, group_id=gid)
    with RunStore(tmp_path) as store:
        for calls, rollouts in groups.values():
            store.insert_calls(calls)
            for r in rollouts:
                store.put_rollout(r)
    out = CliRunner().invoke(app, ["tree", "stats", str(tmp_path), "--json"])
    assert json.loads(out.stdout)["trees"] == 5  # not a training run (no step records): all kept
    with RunStore(tmp_path) as store:
        for step in (2, 3):
            store.put_step(step, {"loss": 0.0})
    out = CliRunner().invoke(app, ["tree", "stats", str(tmp_path), "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    kept = ("s2-a1-g0", "s3-a2-g0", "eval-s3-a2-builtin-0")
    expected = sum_stats(build_tree(*groups[g]).stats for g in kept).to_dict()
    assert d["trees"] == 3 and d["rollouts"] == 6
    assert d["unique_tokens"] == expected["unique_tokens"] and d["per_call_tokens"] == expected["per_call_tokens"]
    shown = CliRunner().invoke(app, ["tree", "show", str(tmp_path), "--group", "s3-a1-g0", "--tokenizer", "none"])
    assert shown.exit_code == 0 and "s3-a1-g0" in shown.output  # still reachable by its id


def test_show_terminal_and_html(app, run_dir, tmp_path):
    path, _ = run_dir
    out = CliRunner().invoke(app, ["tree", "show", str(path), "--task", "t1", "--tokenizer", "none",
                                   "--estimator", "tree_grpo"])
    assert out.exit_code == 0, out.output
    assert "group g0" in out.output and "rollouts" in out.output and "V=" in out.output
    assert "g1" not in out.output
    page = tmp_path / "view" / "tree.html"
    out = CliRunner().invoke(app, ["tree", "show", str(path), "--task", "t2", "--group", "g1", "--tokenizer",
                                   "none", "--html", str(page), "--all"])
    assert out.exit_code == 0, out.output
    text = page.read_text()
    assert text.startswith("<!DOCTYPE html>") and "<details" in text and "http" not in text
    assert "timeout" in text and "abnormal_rollouts" in text
    assert 'class="tok"' in text and 'class="ctx"' in text
    assert 'class="ctxs"' in text  # the timed-out rollout's completions: sampled, not trained


def flat_output(result) -> str:
    return " ".join(result.output.split())


def test_cli_errors_are_messages_not_tracebacks(app, run_dir, tmp_path):
    path, _ = run_dir
    r = CliRunner().invoke(app, ["tree", "show", str(tmp_path / "missing")])
    assert r.exit_code == 2 and "not a run directory" in flat_output(r) and "Traceback" not in flat_output(r)
    r = CliRunner().invoke(app, ["tree", "show", str(path), "--tokenizer", "none"])
    assert r.exit_code == 2 and "pass --task" in flat_output(r)
    r = CliRunner().invoke(app, ["tree", "show", str(path), "--task", "nope", "--tokenizer", "none"])
    assert r.exit_code == 1 and "no rollouts" in flat_output(r)
    r = CliRunner().invoke(app, ["tree", "show", str(path), "--task", "t1", "--estimator", "ppo"])
    assert r.exit_code == 2 and "--estimator" in flat_output(r)


def test_unloadable_tokenizer_falls_back_to_ids(app, run_dir, tmp_path, monkeypatch):
    import sys
    import types

    class FailingTokenizer:  # stands in for transformers.AutoTokenizer (its import alone takes ~10 s)
        @staticmethod
        def from_pretrained(path):
            raise OSError(f"no tokenizer files in {path}")

    monkeypatch.setitem(sys.modules, "transformers", types.SimpleNamespace(AutoTokenizer=FailingTokenizer))
    path, _ = run_dir
    r = CliRunner().invoke(app, ["tree", "show", str(path), "--task", "t1", "--tokenizer", str(tmp_path)])
    assert r.exit_code == 0 and "showing token ids" in flat_output(r) and "no tokenizer files" in flat_output(r)


@pytest.mark.model
def test_show_decodes_with_the_real_tokenizer(app, tmp_path):
    from transformers import AutoTokenizer

    from harnessrl.engine.model import smollm2_tokenizer_dir
    from tests.support.synthetic import conversation_calls, make_rollout

    tok = AutoTokenizer.from_pretrained(smollm2_tokenizer_dir())
    prompt = tok.encode("You are a careful agent. Fix the bug in main.py")
    answer = tok.encode(" I will read main.py first.")
    calls = conversation_calls("r0", prompt, [(answer, tok.encode(" ok"))])
    with RunStore(tmp_path) as store:
        store.insert_calls(calls)
        store.put_rollout(make_rollout("r0", 1.0, task_id="t"))
    page = tmp_path / "t.html"
    r = CliRunner().invoke(app, ["tree", "show", str(tmp_path), "--html", str(page)])
    assert r.exit_code == 0, r.output
    assert "careful agent" in page.read_text()


def test_previews_use_the_run_model_tokenizer(tmp_path):
    from harnessrl.app.tree import _run_model

    with RunStore(tmp_path) as store:
        assert _run_model(store) is None
        store.set_meta("config", {"model": {"path": "/models/my-policy"}})
        assert _run_model(store) == "/models/my-policy"
