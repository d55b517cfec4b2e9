"""harnessrl experiment (experiment/arms.py, experiment/shared_baseline.py, experiment/results.py).

The end-to-end case runs the real loop on a tiny model with rollouts sampled straight from its
engine (tests/run/fakes.py: reward 1 when the first sampled token is even): an arm with a real
learning rate, which raises the pass rate, against lr = 0, which provably cannot (its weights stay
the base model's, checked below). The tool must tell them apart: the first arm's change excludes 0,
the null arm's does not, and their paired difference excludes 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from rich.console import Console
from typer.testing import CliRunner

from harnessrl.app.main import app
from harnessrl.engine import make_tiny_model
from harnessrl.experiment.arms import (BASELINE, ExperimentError, load_spec, plan_runs, run_experiment,
                                      write_experiment_results)
from harnessrl.experiment.results import run_training, training_markdown
from harnessrl.experiment.shared_baseline import BaselineError, adopt_baseline
from harnessrl.store import RunStore
from harnessrl.store.records import RolloutRecord

from .fakes import FakeTask, fake_collector_factory

TRAIN = [FakeTask("t0", tuple(range(10, 30)))]
HELD_OUT = [FakeTask(f"e{i}", tuple(range(10 + i, 30 + i)), "test") for i in range(6)]


def tasks(cfg):
    return TRAIN, HELD_OUT


def base_overrides(tiny) -> list[str]:
    return [f"model.path={tiny}", "engine.type=hf", "output.tensorboard=false", "loop.steps=4",
            "loop.groups_per_step=2", "loop.n_per_group=16", "loop.eval_size=6", "loop.eval_samples=8",
            "loop.eval_every=0", "serve.max_tokens=1", "filters.truncated=keep"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=1)


def test_experiment_tells_a_learning_arm_from_lr_0_and_skips_finished_runs(tiny, tmp_path):
    out = tmp_path / "exp"
    spec = load_spec(None, arms=["null=optimizer.lr=0", "learn=optimizer.lr=5e-2"], seeds="0,1", out=out,
                     overrides=base_overrides(tiny))
    baselines, runs = run_experiment(spec, Console(quiet=True), collector_factory=fake_collector_factory(),
                                     tasks_loader=tasks)
    results, missing = write_experiment_results(spec, runs)
    assert missing == []
    by_arm = {r.arm: r for r in results}
    learn, null = by_arm["learn"], by_arm["null"]
    assert learn.change.seeds == null.change.seeds == 2 and learn.tasks == 6
    assert learn.change.ci95[0] > 0, learn  # a real learning rate raises held-out pass@1 ...
    assert null.change.ci95[0] <= 0 <= null.change.ci95[1], null  # ... lr = 0 cannot
    assert null.versus is None and learn.versus is not None and learn.versus.ci95[0] > 0

    # lr = 0 trains nothing: the null arm's last checkpoint is the base model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny).state_dict()
    last = AutoModelForCausalLM.from_pretrained(out / "null" / "seed-1" / "checkpoints" / "step_000004" / "policy")
    assert all(torch.equal(base[k], v) for k, v in last.state_dict().items())

    # one baseline eval per seed, shared: every arm's step 0 is its seed's baseline rollouts, not a new eval
    for run in runs:
        with RunStore(baselines[run.seed].run_dir) as st:
            shared = sorted(r.rollout_id for r in st.list_rollouts(step=0))
        with RunStore(run.run_dir) as st:
            assert sorted(r.rollout_id for r in st.list_rollouts(step=0)) == shared
            assert st.get_meta("eval_task_ids") == [f"e{i}" for i in range(6)]
    assert len(shared) == 6 * 8

    md = (out / "experiment.md").read_text()
    assert "| learn | builtin · test |" in md and "vs null" in md
    assert (out / "experiment.png").stat().st_size > 0
    saved = json.loads((out / "experiment.json").read_text())
    assert {r["arm"] for r in saved["results"]} == {"learn", "null"}
    # what training cost, per arm and seed, from the runs' step records (4 steps of 2 groups of 16)
    assert set(saved["training"]) == {"learn", "null"} and set(saved["training"]["learn"]) == {"0", "1"}
    for arm in ("learn", "null"):
        for run_cost in saved["training"][arm].values():
            assert run_cost["wall_s"] > 0 and run_cost["tokens_trained"] > 0
            assert 0 <= run_cost["informative_groups"] <= 1
    assert "| learn | 2 |" in md and "training wall (s)" in md

    # a rerun skips every finished run (a train call would fail) and reports the same numbers
    def refuse(*args, **kwargs):
        raise AssertionError("a finished run was trained again")

    run_experiment(spec, Console(quiet=True), train=refuse)
    again, _ = write_experiment_results(spec, runs)
    assert [r.change for r in again] == [r.change for r in results]


def test_run_training_reads_the_training_steps_only():
    steps = [(0, {"wall_s": 50.0, "eval": {"x": 0.1}}),  # the baseline eval: not training
             (1, {"informative_groups": 0.5, "tokens_trained": 100, "wall_s": 10.0, "mismatch_kl": 0.002}),
             (2, {"informative_groups": 1.0, "tokens_trained": 300, "wall_s": 12.5, "mismatch_kl": 0.001})]
    assert run_training(steps) == {"informative_groups": 0.75, "tokens_trained": 200.0, "wall_s": 22.5,
                                   "mismatch_kl": 0.002}
    assert run_training([(1, {"wall_s": 3.0})]) == {"wall_s": 3.0}  # a key no step recorded is left out
    md = "\n".join(training_markdown({"a": {0: {"wall_s": 10.0}, 1: {"wall_s": 20.0}}, "b": {}}))
    assert "| a | 2 | - | - | - | - | - | - | - | 15 | - |" in md and "| b |" not in md  # only the wall was recorded


def test_cli_report_only_and_refusals(tiny, tmp_path):
    exp = tmp_path / "e.yaml"
    exp.write_text(f"out: {tmp_path / 'exp'}\nseeds: [0, 1]\narms:\n  a: optimizer.lr=1e-3\n  b: [optimizer.lr=0]\n"
                   f"overrides: [model.path={tiny}, engine.type=hf]\n")
    def run(*args):
        res = CliRunner().invoke(app, ["experiment", *args])
        return res.exit_code, " ".join(res.output.split())

    code, text = run(str(exp), "--report-only")
    assert code == 1 and "Not finished (left out): a · seed 0" in text  # nothing ran yet
    code, text = run(str(exp), "--arm", "c=loop.eval_samples=3", "--report-only")
    assert code == 2 and "loop.eval_samples" in text and "shared baseline" in text
    code, text = run(str(exp), "--seeds", "1,1")
    assert code == 2 and "distinct" in text
    code, text = run(str(tmp_path / "missing.yaml"))
    assert code == 2 and "does not exist" in text
    code, text = run(str(exp), str(exp))
    assert code == 2 and "one experiment file" in text


def test_spec_arms_seeds_and_plan(tmp_path):
    spec = load_spec(None, arms=["flat=algorithm.name=grpo loop.branching.points=0",
                                 "tree=algorithm.name=tree_grpo 'loop.branching={points: 2, width: 2}'"],
                     seeds="3,4", out=tmp_path, overrides=["loop.steps=2"])
    assert spec.arms["tree"] == ["algorithm.name=tree_grpo", "loop.branching={points: 2, width: 2}"]
    baselines, runs = plan_runs(spec)
    assert [(r.arm, r.seed) for r in runs] == [("flat", 3), ("tree", 3), ("flat", 4), ("tree", 4)]
    assert baselines[4].cfg.loop.steps == 0 and baselines[4].cfg.loop.seed == 4
    assert baselines[4].run_dir == tmp_path / BASELINE / "seed-4"
    assert runs[1].cfg.loop.branching.points == 2 and runs[1].cfg.loop.steps == 2 and runs[1].cfg.loop.seed == 3
    for bad, match in ((["baseline=loop.steps=1"], "not 'baseline'"), (["a=loop.steps=0"], "trains nothing"),
                       (["a=nope.key=1"], "nope"), (["a"], "NAME=")):
        with pytest.raises(ExperimentError, match=match):
            plan_runs(load_spec(None, arms=bad, out=tmp_path))
    with pytest.raises(ExperimentError, match="eval_size"):
        plan_runs(load_spec(None, arms=["a=loop.steps=1"], out=tmp_path, overrides=["loop.eval_size=0"]))


def test_adopt_baseline_copies_step_0_and_refuses_a_training_run(tmp_path):
    with RunStore(tmp_path / "base") as st:
        st.set_meta("config", {"loop": {"steps": 0}})
        st.set_meta("eval_task_ids", ["e0", "e1"])
        st.put_step(0, {"eval": {"builtin": 0.5}})
        st.put_rollout(RolloutRecord(rollout_id="r0", task_id="e0", harness="builtin", group_id="eval-s0-a1-g0",
                                     status="ok", reward=1.0, step=0, sample_idx=0, split="test"))
    adopt_baseline(tmp_path / "base", tmp_path / "arm")
    with RunStore(tmp_path / "arm") as st:
        assert [s for s, _ in st.list_steps()] == [0] and [r.rollout_id for r in st.list_rollouts()] == ["r0"]
        assert st.get_meta("eval_task_ids") == ["e0", "e1"] and st.get_meta("config") is None
        assert st.get_meta("baseline_from") == str((tmp_path / "base").resolve())
    with pytest.raises(BaselineError, match="already holds"):
        adopt_baseline(tmp_path / "base", tmp_path / "arm")
    with RunStore(tmp_path / "trained") as st:
        st.put_step(0, {})
        st.put_step(1, {})
    with pytest.raises(BaselineError, match="step 0 only"):
        adopt_baseline(tmp_path / "trained", tmp_path / "arm2")
    with pytest.raises(BaselineError, match="no baseline"):
        adopt_baseline(tmp_path / "nothing", tmp_path / "arm3")


@pytest.mark.parametrize("path", sorted((Path(__file__).resolve().parents[2] / "configs" / "experiments").glob("*.yaml")),
                         ids=lambda p: p.name)
def test_every_shipped_experiment_plans_3_seeds_of_at_least_5_steps_the_same_in_every_arm(path, monkeypatch):
    """The file jobs' comparisons run 8 steps; the multi-step one 5, from its cold start."""
    monkeypatch.chdir(path.parents[2])  # an experiment names its config from the repository root
    spec = load_spec(path)
    baselines, runs = plan_runs(spec)
    assert len(spec.seeds) >= 3 and len(spec.arms) >= 2 and len(baselines) == len(spec.seeds)
    assert all(r.cfg.loop.steps >= 5 for r in runs) and len({r.cfg.loop.steps for r in runs}) == 1


def test_a_setting_added_since_a_run_was_recorded_is_no_difference():
    """A run recorded before a setting existed (here engine.prefix_caching) still resumes at its
    default; a changed value, or a setting the schema no longer knows, is a difference."""
    from harnessrl.config import load_config
    from harnessrl.experiment.arms import config_differences

    planned = load_config(None)
    stored = planned.model_dump(mode="json")
    del stored["engine"]["prefix_caching"]
    assert config_differences(stored, planned) == []
    assert config_differences(stored, load_config(None, ["engine.prefix_caching=false"])) == ["engine.prefix_caching"]
    moved = planned.model_dump(mode="json")  # recorded before serve.max_tokens was loop.max_tokens
    moved["loop"]["max_tokens"] = moved["serve"].pop("max_tokens")
    assert config_differences(moved, planned) == []
    stored["engine"]["gone"] = 1
    assert "engine.gone" in config_differences(stored, planned)
