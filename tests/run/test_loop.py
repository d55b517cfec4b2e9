"""The loop with in-process fakes on a tiny model: weight sync, metrics, report, resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from rich.console import Console

from harnessrl.engine import SamplingParams, make_tiny_model
from harnessrl.config import load_config
from harnessrl.report.display import RunDisplay
from harnessrl.run.errors import TrainError
from harnessrl.run.loop import record_step, run_training, train_step
from harnessrl.run.open_run import close_run, open_run
from harnessrl.store import RunStore
from harnessrl.train.packing import forest_from_paths, pack_forest, token_logprobs

from .fakes import fake_collector_factory, fake_task_sets, fake_tasks

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=3)


def overrides(tiny_dir, run_dir, steps=3):
    return [f"model.path={tiny_dir}", "engine.type=hf", f"output.run_dir={run_dir}", "output.tensorboard=false",
            f"loop.steps={steps}", "loop.groups_per_step=2", "loop.n_per_group=3", "loop.eval_size=2",
            "loop.eval_every=2", "serve.max_tokens=6", "filters.truncated=keep", "optimizer.lr=1e-3", "algorithm.token_budget=64",
            "harnesses=[{name: builtin, weight: 1}, {name: mini-swe-agent, weight: 1}]"]


def test_weight_sync_engine_matches_trainer_and_records_new_version(tiny_dir, tmp_path):
    cfg = load_config(None, overrides(tiny_dir, tmp_path / "run"))
    parts = open_run(cfg, False, Console(quiet=True), fake_collector_factory(), fake_tasks)
    try:
        before = {k: v.detach().clone() for k, v in parts.trainer.policy.named_parameters()}
        with RunDisplay(Console(quiet=True), 1, 1) as display:
            rec = train_step(parts, 1, display)
        assert rec.policy_version == 1 == parts.engine.policy_version
        assert any(not torch.equal(before[k], v) for k, v in parts.trainer.policy.named_parameters())
        prompt = list(range(100, 120))
        gen = asyncio_run(parts.engine.generate(prompt, SamplingParams(temperature=0.7, max_tokens=8)))
        assert gen.policy_version == 1  # new calls record the new version
        forest, idx = forest_from_paths([prompt + list(gen.token_ids)])
        (chunk,) = pack_forest(forest, 4096)
        tgt = torch.as_tensor(idx[0][len(prompt):])
        with torch.no_grad():
            lp, _ = token_logprobs(parts.trainer.policy, chunk, tgt, torch.full((len(tgt),), 0.7))
        assert np.max(np.abs(lp.numpy() - np.asarray(gen.logprobs))) < 1e-4
        assert rec.update.tokens_computed <= rec.trees.per_call_tokens
        assert set(rec.rollouts.reward) == {"builtin", "mini-swe-agent"}
    finally:
        parts.engine.close()
        parts.store.close()


def asyncio_run(coro):
    import asyncio

    return asyncio.run(coro)


def test_full_run_writes_metrics_report_and_refuses_to_overwrite(tiny_dir, tmp_path):
    cfg = load_config(None, overrides(tiny_dir, tmp_path / "run", steps=2))
    res = run_training(cfg, console=Console(quiet=True), collector_factory=fake_collector_factory(),
                       tasks_loader=fake_task_sets)
    lines = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == [0, 1, 2]
    for key in ("loss", "entropy", "clip_frac", "is_weight", "abs_logp_gap", "tokens_trained",
                "unique_tree_tokens", "per_call_tokens"):
        assert key in lines[1], key
    assert "kl" not in lines[1]  # no reference model: no KL to the reference recorded (a 0 nobody measured)
    seen = json.loads((tmp_path / "run" / "difficulty.json").read_text())["observations"]
    assert {o["step"] for o in seen if o["split"] == "eval"} == {0, 2}  # the evals inform the sampler too
    assert {o["step"] for o in seen if o["split"] == "train"} == {1, 2}
    assert set(lines[1]["time"]) >= {"rollout", "tree", "train", "sync"}
    assert set(lines[0]["eval"]) == set(lines[2]["eval"]) == {"builtin", "mini-swe-agent"}
    assert "| builtin |" in res.report.read_text()
    for rec in (lines[0], lines[2]):  # every eval set, every harness: pass@1 with n and a 95% interval
        assert set(rec["eval_sets"]) == {"test", "unseen"}
        for name, size in (("test", 2), ("unseen", 2)):
            agg = rec["eval_sets"][name]["builtin"]
            assert agg["n_tasks"] == size and agg["n_rollouts"] == size
            assert agg["pass@1_ci95"][0] <= agg["pass@1"] <= agg["pass@1_ci95"][1]
        assert rec["eval"] == {h: a["pass@1"] for h, a in rec["eval_sets"]["test"].items()}
    assert "| unseen | mini-swe-agent |" in res.report.read_text()
    assert (res.plots_dir / "reward.png").is_file() and (res.plots_dir / "eval_sets.png").is_file()
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(tmp_path / "run" / "checkpoints" / "step_000002" / "policy")
    with pytest.raises(TrainError, match="--resume"):
        run_training(cfg, console=Console(quiet=True), collector_factory=fake_collector_factory(),
                     tasks_loader=fake_tasks)


def test_resume_after_sigkill_no_step_repeated_or_lost(tiny_dir, tmp_path):
    run_dir = tmp_path / "run"
    args = [sys.executable, str(HERE / "run_fake.py"), "0.3"]
    ov = overrides(tiny_dir, run_dir, steps=5)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen(args + ["fresh", *ov], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    from harnessrl.store.run_store import RunStore

    deadline = time.time() + 240
    killed_after = None
    while time.time() < deadline and proc.poll() is None:
        with RunStore(run_dir) as st:
            steps = [s for s, _ in st.list_steps()]
        if max(steps, default=0) >= 2:
            proc.send_signal(signal.SIGKILL)
            killed_after = max(steps)
            break
        time.sleep(0.05)
    proc.wait(timeout=30)
    assert killed_after is not None and killed_after < 5, proc.stderr.read().decode()[-2000:]
    out = subprocess.run(args + ["resume", *ov], env=env, capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    with RunStore(run_dir) as st:
        recs = dict(st.list_steps())
        attempts = st.get_meta("attempt")
    assert sorted(recs) == [0, 1, 2, 3, 4, 5]
    assert [recs[s]["policy_version"] for s in range(1, 6)] == [1, 2, 3, 4, 5]
    assert attempts == 2
    lines = [json.loads(x)["step"] for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert lines == [0, 1, 2, 3, 4, 5]  # the JSONL mirror holds every step once
    state = torch.load(run_dir / "checkpoints" / "step_000005" / "trainer.pt", weights_only=False)
    updates = sum(1 for s in range(1, 6) if recs[s]["groups_trained"] > 0)  # steps with a gradient
    assert updates >= 3
    assert {int(s["step"]) for s in state["optimizer"]["state"].values()} == {updates}  # none repeated or lost


def test_unknown_harness_and_model_are_clear_errors(tmp_path, tiny_dir):
    from harnessrl.run.runner_collector import RunnerCollector

    cfg = load_config(None, overrides(tiny_dir, tmp_path / "run") + ["harnesses=[{name: nosuch}]"])

    class FakeEngine:
        model_path, max_model_len, policy_version = str(tiny_dir), 2048, 0

    from harnessrl.store.run_store import RunStore

    with RunStore(tmp_path / "s") as store, pytest.raises(TrainError, match="nosuch"):
        RunnerCollector(cfg, FakeEngine(), store, tiny_dir)
    bad = load_config(None, overrides(tiny_dir, tmp_path / "run2") + ["model.path=/nonexistent/model"])
    with pytest.raises(TrainError):
        run_training(bad, console=Console(quiet=True), collector_factory=fake_collector_factory(),
                     tasks_loader=fake_tasks)


def test_per_harness_loss_share_gives_each_harness_equal_weight():
    from harnessrl.algo import grpo
    from harnessrl.algo.estimator import per_harness_share
    from harnessrl.tree.build import build_tree
    from tests.support.synthetic import claude_code_group
    from dataclasses import replace as dc_replace

    trees, advs = [], []
    for i, (h, n) in enumerate([("a", 2), ("b", 6)]):
        calls, rolls = claude_code_group(n_rollouts=n, prefix_tokens=20, turns=2, completion_tokens=(3, 6),
                                         observation_tokens=(2, 4), seed=i, group_id=f"g{i}")
        rolls = [dc_replace(r, harness=h, reward=float(k % 2)) for k, r in enumerate(rolls)]
        tree = build_tree(calls, rolls)
        trees.append(tree)
        advs.append(grpo(tree))
    out = per_harness_share(trees, advs)
    total = sum(a.norm for a in advs)
    shares = [float(o.weight_sum.sum()) / total for o in out]
    assert shares[0] == pytest.approx(shares[1]) == pytest.approx(0.5)


def test_resume_with_fewer_steps_ends_with_the_eval_of_the_last_step(tiny_dir, tmp_path):
    """A long run is cut short by resuming it with loop.steps lowered to the step it reached: that
    step was recorded without an eval (it was not the last then); the resumed run evaluates it."""
    run_dir = tmp_path / "run"
    cfg = load_config(None, overrides(tiny_dir, run_dir, steps=3) + ["loop.eval_every=0"])
    parts = open_run(cfg, False, Console(quiet=True), fake_collector_factory(), fake_tasks)
    try:
        with RunDisplay(Console(quiet=True), 3, 1) as display:
            record_step(parts.store, parts.log, 1, train_step(parts, 1, display))
    finally:
        close_run(parts)
    cut = load_config(None, overrides(tiny_dir, run_dir, steps=1) + ["loop.eval_every=0"])
    run_training(cut, resume=True, console=Console(quiet=True), collector_factory=fake_collector_factory(),
                 tasks_loader=fake_tasks)
    rows = {r["step"]: r for r in map(json.loads, (run_dir / "metrics.jsonl").read_text().splitlines())}
    assert set(rows) == {0, 1}
    assert set(rows[1]["eval"]) == {"builtin", "mini-swe-agent"} and rows[1]["time"]["eval"] > 0
    assert "loss" in rows[1]  # the step's own record is kept
    with RunStore(run_dir) as store:
        evals = [r for r in store.list_rollouts(step=1) if r.group_id.startswith("eval-")]
    assert evals, "no eval rollouts stored for step 1"


def test_train_through_one_harness_evaluate_through_two_with_per_set_sizes(tiny_dir, tmp_path):
    """eval_harnesses: the held-out sets go through every listed harness, training through
    `harnesses` only; an eval set's own size holds; the report says what training changed."""
    run_dir = tmp_path / "run"
    cfg = load_config(None, overrides(tiny_dir, run_dir, steps=1) + [
        "harnesses=[{name: builtin}]", "eval_harnesses=[{name: builtin}, {name: mini-swe-agent}]",
        "tasks.eval_sets=[test, {name: unseen, size: 1, samples: 2}]"])
    res = run_training(cfg, console=Console(quiet=True), collector_factory=fake_collector_factory(),
                       tasks_loader=fake_task_sets)
    with RunStore(run_dir) as store:
        rollouts = store.list_rollouts()
    train = {r.harness for r in rollouts if not r.group_id.startswith("eval-")}
    evaluated = {r.harness for r in rollouts if r.group_id.startswith("eval-")}
    assert train == {"builtin"} and evaluated == {"builtin", "mini-swe-agent"}
    unseen = [r for r in rollouts if r.group_id.startswith("eval-unseen-") and r.step == 0]
    assert len({r.task_id for r in unseen}) == 1 and len(unseen) == 2 * 2  # 1 task x 2 samples x 2 harnesses
    report = res.report.read_text()
    assert "## What training changed" in report and "| mini-swe-agent · unseen |" in report
