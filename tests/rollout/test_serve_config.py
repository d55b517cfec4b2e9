"""`harnessrl rollout` / `eval` serve as a training run does: the unset flags take the run config's
values (its defaults, `--config FILE` or `--from-run DIR`), explicit flags override them, and a
missing file or run directory is a message with exit code 2."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from harnessrl.app.main import app
from harnessrl.rollout import jobs
from harnessrl.run.config import LoopConfig, RunConfig, ServeSection, load_config
from harnessrl.app.serve_config import FLAG_KEYS, harness_specs, serving_config
from harnessrl.store import RunStore

TRAINED = ["render.tool_format=bash", "loop.max_tokens=64", "loop.max_turns=2", "serve.default_temperature=0.45",
           "loop.rollout_timeout_s=77", "loop.concurrency=3", "sandbox.type=local",
           "harnesses=[{name: builtin, options: {extra_args: [--call-timeout, '50']}}]"]


def _train_run_dir(path, overrides=TRAINED):
    """A run directory as `harnessrl train` leaves it: a run store with the resolved config."""
    with RunStore(path) as store:
        store.set_meta("config", load_config(None, overrides).model_dump(mode="json"))
    return path


def _options_run(monkeypatch, args: list[str]) -> dict:
    """Invoke a command with the runner replaced by a recorder; what the runner would have run with."""
    seen: dict = {}

    def record(plans, **kwargs):
        seen.update(kwargs, harnesses=sorted({p.harness for p in plans}), n={p.n for p in plans},
                    tasks=list(dict.fromkeys(p.task.id for p in plans)))
        return []

    monkeypatch.setattr(jobs, "run_plans", record)
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    return seen


def test_unset_flags_take_the_run_config_defaults():
    cfg = serving_config(None, None, {name: None for name in FLAG_KEYS})
    loop = LoopConfig()
    assert (cfg.loop.max_turns, cfg.loop.max_tokens, cfg.loop.rollout_timeout_s, cfg.loop.concurrency) == \
        (loop.max_turns, loop.max_tokens, loop.rollout_timeout_s, loop.concurrency)
    assert cfg.serve.default_temperature == ServeSection().default_temperature
    assert cfg.engine.type == RunConfig().engine.type == "auto" and cfg.render.tool_format is None


def test_serve_takes_the_same_defaults():
    from harnessrl.app.serve import _run_defaults

    run = RunConfig()
    assert _run_defaults(None, None, None) == (run.engine.type, run.loop.max_tokens, run.serve.default_temperature)
    assert _run_defaults("hf", 99, 0.5) == ("hf", 99, 0.5)


def test_flags_override_the_stored_config(tmp_path):
    run = _train_run_dir(tmp_path / "train")
    cfg = serving_config(None, run, {"max_turns": 6, "default_temperature": None, "engine": "scripted"})
    assert cfg.loop.max_turns == 6  # given
    assert cfg.serve.default_temperature == 0.45 and cfg.render.tool_format == "bash"  # as it trained
    assert cfg.engine.type == "auto"  # scripted is no run engine: left out of the config
    assert harness_specs(cfg, None) == (["builtin"], {"builtin": {"extra_args": ["--call-timeout", "50"]}})
    assert harness_specs(cfg, ["codex:small"]) == (["codex:small"], {})


@pytest.mark.parametrize("command", ["rollout", "eval"])
def test_from_run_gives_the_runner_the_trained_limits(monkeypatch, tmp_path, command):
    run = _train_run_dir(tmp_path / "train")
    seen = _options_run(monkeypatch, [command, "--from-run", str(run), "--tasks", "builtin:write_word:test",
                                      "-d", str(tmp_path / "out"), "--engine", "scripted", "--max-turns", "5"])
    opts = seen["opts"]
    assert (opts.max_turns, opts.harness_timeout_s, seen["concurrency"]) == (5, 77.0, 3)  # 5: the flag wins
    assert opts.sandbox_cfg.type == "local" and seen["harnesses"] == ["builtin"]
    assert opts.harness_options == {"builtin": {"extra_args": ["--call-timeout", "50"]}}
    assert seen["n"] == {4 if command == "rollout" else 1}  # loop.n_per_group / loop.eval_samples


def test_eval_from_run_serves_as_the_run_trained(tmp_path):
    """The in-process proxy (scripted engine, real builtin harness) renders, caps and defaults as the
    run config says; an explicit flag overrides one setting."""
    run = _train_run_dir(tmp_path / "train")
    out = tmp_path / "eval"
    r = CliRunner().invoke(app, ["eval", "--from-run", str(run), "--engine", "scripted", "--tasks",
                                 "builtin:write_word:test", "--limit", "1", "-d", str(out), "--json",
                                 "--default-temperature", "0.9"])
    assert r.exit_code == 0, r.output
    with RunStore(out) as store:
        assert store.get_meta("render")["tool_format"] == "bash"
        served = store.get_meta("serve")
        assert (served["default_temperature"], served["max_tokens_cap"]) == (0.9, 64)
        calls = store.list_calls()
    assert calls and all(c.meta["sampling"]["max_tokens"] == 64 for c in calls)  # the builtin agent asks 256


def test_eval_from_run_without_tasks_evaluates_the_runs_pinned_held_out_tasks(monkeypatch, tmp_path):
    """The run's own held-out sets, with its families filter, and exactly the ids it pinned at its
    first start (not the first tasks of the whole split), so before and after compare one task set."""
    from harnessrl.tasks import load_tasks

    run = _train_run_dir(tmp_path / "train", [*TRAINED, "tasks.families=[write_word, copy_file]", "loop.eval_size=3"])
    held_out = [t.id for t in load_tasks("builtin:test") if t.family in ("write_word", "copy_file")]
    pinned = [held_out[-1], held_out[0], held_out[2]]
    with RunStore(run) as store:
        store.set_meta("eval_task_ids", pinned)
    seen = _options_run(monkeypatch, ["eval", "--from-run", str(run), "-d", str(tmp_path / "out"), "--engine",
                                      "scripted"])
    assert seen["tasks"] == pinned
    with_tasks = _options_run(monkeypatch, ["eval", "--from-run", str(run), "-t", "builtin:write_word:test",
                                            "--limit", "2", "-d", str(tmp_path / "out2"), "--engine", "scripted"])
    assert len(with_tasks["tasks"]) == 2 and all(i.startswith("write_word") for i in with_tasks["tasks"])


def test_eval_config_file_is_the_same_as_its_values(tmp_path):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"loop": {"max_tokens": 32}, "render": {"tool_format": "bash_examples"}}))
    cfg = serving_config(path, None, {"max_tokens": None, "tool_format": None})
    assert (cfg.loop.max_tokens, cfg.render.tool_format) == (32, "bash_examples")


@pytest.mark.parametrize("case", ["missing_dir", "no_store", "no_config", "missing_file", "both"])
def test_a_missing_config_or_run_is_a_message(tmp_path, case):
    (tmp_path / "empty").mkdir()
    with RunStore(tmp_path / "rollouts"):
        pass  # a run store that no training run wrote (as `harnessrl rollout` leaves it)
    yaml_path = tmp_path / "run.yaml"
    yaml_path.write_text("loop: {max_turns: 3}\n")
    args, expected = {
        "missing_dir": (["--from-run", str(tmp_path / "nope")], "does not exist"),
        "no_store": (["--from-run", str(tmp_path / "empty")], "is not a run directory"),
        "no_config": (["--from-run", str(tmp_path / "rollouts")], "holds no run config"),
        "missing_file": (["--config", str(tmp_path / "nope.yaml")], "does not exist"),
        "both": (["--config", str(yaml_path), "--from-run", str(tmp_path / "rollouts")], "not both"),
    }[case]
    r = CliRunner().invoke(app, ["eval", *args, "-d", str(tmp_path / "out")])
    assert r.exit_code == 2 and expected in r.output and "Traceback" not in r.output
    assert not (tmp_path / "out").exists()  # refused before a run store was opened
