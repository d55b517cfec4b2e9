"""`--from-run RUN` serves (or evaluates) the run's last checkpoint with the run's serving settings, or
refuses with the fix; `--model` overrides the weights. `rollout` ends with the pass rate and mean reward
per harness, as `eval` reports them. No engine is started: run dirs are built by hand and the rollouts
are fakes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harnessrl.app.main import app
from harnessrl.app.serve_config import last_checkpoint_policy, serving_config
from harnessrl.config import ConfigError, load_config
from harnessrl.store import RunStore
from harnessrl.store.records import RolloutRecord


def _run(path: Path, checkpoints: tuple[int, ...] = ()) -> Path:
    with RunStore(path) as store:
        store.set_meta("config", load_config(None, ["serve.max_tokens=48", "sandbox.type=local"]).model_dump(mode="json"))
    for step in checkpoints:
        policy = path / "checkpoints" / f"step_{step:06d}" / "policy"
        policy.mkdir(parents=True)
        (policy / "config.json").write_text(json.dumps({"max_position_embeddings": 2048}))
    return path


def test_the_last_complete_checkpoint_is_served(tmp_path):
    run = _run(tmp_path, (4, 8, 12))
    (run / "checkpoints" / "step_000016.tmp" / "policy").mkdir(parents=True)  # being written: not complete
    (run / "checkpoints" / "step_000020" / "policy").mkdir(parents=True)  # no config.json: not an HF dir
    assert last_checkpoint_policy(run) == run / "checkpoints" / "step_000012" / "policy"
    cfg = serving_config(None, run, {"model": None})
    assert cfg.model.path == str(run / "checkpoints" / "step_000012" / "policy") and cfg.serve.max_tokens == 48
    assert serving_config(None, run, {"model": "org/other"}).model.path == "org/other"  # --model overrides


def test_a_run_without_a_checkpoint_is_refused_with_the_fix(tmp_path):
    run = _run(tmp_path)
    with pytest.raises(ConfigError, match="has no checkpoint yet.*--model"):
        last_checkpoint_policy(run)


@pytest.mark.parametrize("command", [["serve", "--port", "0"], ["eval", "--tasks", "builtin:write_word:test"]])
def test_from_run_without_a_checkpoint_is_one_line(tmp_path, command):
    run = _run(tmp_path / "run")
    r = CliRunner().invoke(app, [*command, "--from-run", str(run), "--engine", "scripted", "--run-dir",
                                 str(tmp_path / "out")], terminal_width=400)
    assert r.exit_code == 2, r.output
    lines = [line for line in r.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "has no checkpoint yet" in lines[0] and "--model" in lines[0], r.output
    assert not (tmp_path / "out").exists()


def _record(i: int, harness: str, reward: float | None, status: str = "ok") -> RolloutRecord:
    return RolloutRecord(rollout_id=f"r{i}", task_id=f"t{i % 2}", harness=harness, group_id=f"g{i % 2}{harness}",
                         status=status, reward=reward, category="files")


def test_rollout_ends_with_pass_rate_and_mean_reward_per_harness(tmp_path, monkeypatch):
    from harnessrl.app import rollout as rollout_app

    records = [_record(0, "builtin", 1.0), _record(1, "builtin", 0.0), _record(2, "builtin", 1.0),
               _record(3, "builtin", 1.0), _record(4, "codex:small", 0.0), _record(5, "codex:small", 0.5),
               _record(6, "codex:small", None, "timeout"), _record(7, "codex:small", 0.0)]
    monkeypatch.setattr(rollout_app, "_execute", lambda tasks, cfg, flags, n, run_dir, step, split: ([], records,
                                                                                                    tmp_path))
    monkeypatch.setenv("COLUMNS", "300")  # rich's width: one table row per harness
    r = CliRunner().invoke(app, ["rollout", "--engine", "scripted", "--run-dir", str(tmp_path)])
    assert r.exit_code == 0, r.output
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:]] for line in r.output.splitlines()
            if line.count("│") > 4 and line.split("│")[1].strip() in ("builtin", "codex:small")}
    assert rows["builtin"][0] == "0.750" and rows["builtin"][2] == "0.750"  # pass@1, mean reward
    assert rows["codex:small"][0] == "0.000" and rows["codex:small"][2] == "0.125"  # mean over tasks of scored rollouts
    assert "8 rollouts (ok 7, timeout 1)" in r.output and "pass@1 0.375" in r.output
