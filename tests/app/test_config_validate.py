"""`harnessrl config validate` checks what `train` would refuse before it creates anything (harness
names, profiles and installs, the model, task paths, the engine, the sandbox: run/preflight.py), and
`train` stops on the same problems before it makes the run directory. An override's error names the
override; an unknown key gets the nearest valid one."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from harnessrl.app.main import app
from harnessrl.run import loop
from harnessrl.config import ConfigError, load_config
from harnessrl.run.preflight import engine_problems, run_problems

OK = ["harnesses=[{name: builtin}]", "sandbox.type=local", "engine.type=hf"]


def _validate(*args: str):
    return CliRunner().invoke(app, ["config", "validate", *args], terminal_width=400)


def test_a_runnable_config_is_ok():
    assert run_problems(load_config(None, OK)) == []
    r = _validate(*OK)
    assert r.exit_code == 0 and r.output.startswith("ok"), r.output


@pytest.mark.parametrize("override, expected", [
    ("harnesses=[{name: buitlin}]", "did you mean 'builtin'?"),
    ("harnesses=[{name: 'claude-code:huge'}]", "unknown profile 'huge'"),
    ("model.path=/no/such/model", "model.path: /no/such/model does not exist"),
    ("tasks.suite=/no/such/tasks", "tasks.suite: /no/such/tasks does not exist"),
    ("tasks.train_split=nosuchsplit", "tasks"),
])
def test_what_train_would_refuse_fails_validation(override, expected):
    r = _validate(*OK, override)
    assert r.exit_code == 1 and "FAIL" in r.output and expected in r.output, r.output
    assert "Traceback" not in r.output


def test_a_missing_engine_backend_is_named(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "vllm" else real(name, *a))
    problems = engine_problems(load_config(None, ["engine.type=vllm"]))
    assert len(problems) == 1 and "engine.type=vllm" in problems[0] and "vllm" in problems[0]


def test_an_override_typo_is_blamed_on_the_override_with_the_nearest_key(tmp_path):
    config = tmp_path / "demo.yaml"
    config.write_text("loop:\n  steps: 2\n")
    with pytest.raises(ConfigError) as err:
        load_config(config, ["loop.stpes=3"])
    text = str(err.value)
    assert text.startswith("override loop.stpes=3 is invalid") and f"{config} is invalid" not in text
    assert "did you mean loop.steps?" in text
    r = _validate(str(config), "loop.stpes=3")
    assert r.exit_code == 1 and "override loop.stpes=3" in r.output


def test_a_file_typo_is_blamed_on_the_file_with_the_nearest_key(tmp_path):
    config = tmp_path / "bad.yaml"
    config.write_text("optimzer:\n  lr: 1.0e-6\nloop:\n  max_turn: 3\n")
    with pytest.raises(ConfigError) as err:
        load_config(config)
    text = str(err.value)
    assert text.startswith(f"{config} is invalid")
    assert "did you mean optimizer?" in text and "did you mean loop.max_turns?" in text


def test_a_bad_yaml_override_is_a_message():
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(None, ["harnesses=[{name:"])


def test_train_refuses_before_creating_the_run_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(loop, "run_training", lambda *a, **k: pytest.fail("training started"))
    run_dir = tmp_path / "run"
    r = CliRunner().invoke(app, ["train", *OK, "tasks.suite=/no/such/tasks", f"output.run_dir={run_dir}"],
                           terminal_width=400)
    assert r.exit_code == 2 and "does not exist" in r.output, r.output
    assert not run_dir.exists()


def test_a_missing_task_directory_is_named_as_missing(tmp_path):
    from harnessrl.tasks.loader import load_tasks
    from harnessrl.tasks.model import TaskError

    with pytest.raises(TaskError, match="does not exist"):
        load_tasks(tmp_path / "no-tasks")
    r = CliRunner().invoke(app, ["rollout", "--tasks", str(tmp_path / "no-tasks"), "--engine", "scripted",
                                 "--run-dir", str(tmp_path / "out")])
    assert r.exit_code == 2 and "does not exist" in r.output
