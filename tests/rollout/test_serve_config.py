"""`harnessrl rollout` / `eval` serve as a training run does: the unset flags take the run config's
values (its defaults, `--config FILE` or `--from-run DIR`), explicit flags override them, and a
missing file or run directory is a message with exit code 2."""

from __future__ import annotations

import pytest
import yaml
from typer.testing import CliRunner

from harnessrl.app.main import app
from harnessrl.rollout import jobs
from harnessrl.config import LoopConfig, RunConfig, ServeSection, load_config
from harnessrl.app.serve_config import FLAG_KEYS, harness_specs, serving_config
from harnessrl.store import RunStore

TRAINED = ["render.tool_format=bash", "serve.max_tokens=64", "loop.max_turns=2", "serve.default_temperature=0.45",
           "loop.rollout_timeout_s=77", "loop.concurrency=3", "sandbox.type=local",
           "harnesses=[{name: builtin, options: {extra_args: [--call-timeout, '50']}}]"]


def _train_run_dir(path, overrides=TRAINED, checkpoint: bool = True):
    """A run directory as `harnessrl train` leaves it: a run store with the resolved config and (by
    default) one checkpoint, step 2, whose policy/ holds the real tokenizer and a config (no weights:
    the scripted engine loads none)."""
    with RunStore(path) as store:
        store.set_meta("config", load_config(None, overrides).model_dump(mode="json"))
    if checkpoint:
        _checkpoint(path, 2)
    return path


def _checkpoint(run, step: int):
    """RUN/checkpoints/step_N/policy as train/checkpoint.py writes it (tokenizer and config only)."""
    import json
    import shutil

    from harnessrl.engine.model import smollm2_tokenizer_dir

    policy = run / "checkpoints" / f"step_{step:06d}" / "policy"
    shutil.copytree(smollm2_tokenizer_dir(), policy, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    (policy / "config.json").write_text(json.dumps({"max_position_embeddings": 2048}))
    (policy.parent / "trainer.pt").write_bytes(b"")
    return policy


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
    assert (cfg.loop.max_turns, cfg.serve.max_tokens, cfg.loop.rollout_timeout_s, cfg.loop.concurrency) == \
        (loop.max_turns, ServeSection().max_tokens, loop.rollout_timeout_s, loop.concurrency)
    assert cfg.serve.default_temperature == ServeSection().default_temperature
    assert cfg.engine.type == RunConfig().engine.type == "auto" and cfg.render.tool_format is None


def test_serve_takes_the_same_defaults():
    """`serve` without --config / --from-run: the RunConfig defaults, the engine's own settings; a
    flag given is used as it is."""
    from harnessrl.app.serve import serve_plan

    run = RunConfig()
    plan = serve_plan(None, None, {name: None for name in FLAG_KEYS}, None)
    assert (plan.engine, plan.policy, plan.engine_settings) == (run.engine.type, run.serve.policy(), None)
    assert plan.cfg.render.tool_format is None and plan.cfg.model.path is None
    given = serve_plan(None, None, {"engine": "hf", "max_tokens": 99, "default_temperature": 0.5,
                                    "max_tokens_mode": "force", "tool_format": "bash"}, None)
    assert (given.engine, given.policy.max_tokens, given.policy.max_tokens_cap) == ("hf", 99, 99)
    assert (given.policy.default_temperature, given.policy.force, given.cfg.render.tool_format) == \
        (0.5, ("max_tokens",), "bash")


def test_serve_from_run_plans_the_stored_serving(tmp_path):
    """`serve --from-run DIR` takes every serving setting from the config the run stored: its policy
    (defaults, cap, force modes), tool format, model, engine type and engine settings."""
    from harnessrl.app.serve import serve_plan

    run = _train_run_dir(tmp_path / "train", [*TRAINED, "serve.top_p_mode=force", "serve.default_top_p=0.9",
                                              "engine.type=hf", "engine.max_batch=3", "model.path=org/model"])
    with RunStore(run) as store:
        stored = RunConfig.model_validate(store.get_meta("config"))
    plan = serve_plan(None, run, {}, None)
    assert plan.policy == stored.serve.policy() and plan.policy.force == ("top_p",)
    assert (plan.policy.default_temperature, plan.policy.max_tokens_cap) == (0.45, 64)
    assert (plan.engine, plan.engine_settings) == ("hf", stored.engine)
    assert plan.cfg.model.path == str(run / "checkpoints" / "step_000002" / "policy")  # its last checkpoint
    assert serve_plan(None, run, {"model": "org/model"}, None).cfg.model.path == "org/model"  # --model wins
    assert plan.cfg.render.tool_format == stored.render.tool_format == "bash"
    flagged = serve_plan(None, run, {"engine": "scripted", "top_p_mode": "default", "tool_format": "hermes"}, 32)
    assert flagged.engine == "scripted" and flagged.policy.force == () and flagged.policy.max_tokens_cap == 32
    assert flagged.cfg.render.tool_format == "hermes" and flagged.cfg.serve.default_temperature == 0.45


def test_serve_refuses_a_run_engine_it_cannot_run_in_process(tmp_path, capsys):
    import typer

    from harnessrl.app.serve import serve_plan

    run = _train_run_dir(tmp_path / "train", [*TRAINED, "engine.type=vllm_server",
                                              "engine.base_urls=['http://127.0.0.1:9']"])
    with pytest.raises(typer.Exit) as exit_:
        serve_plan(None, run, {}, None)
    assert exit_.value.exit_code == 2 and "--engine auto | hf | vllm | scripted" in capsys.readouterr().err
    assert serve_plan(None, run, {"engine": "hf"}, None).engine == "hf"


def test_serve_builds_the_engine_with_the_runs_settings(tmp_path, monkeypatch):
    """A named run's engine.* settings (less its server URLs: serve's engine runs in this process);
    without one, the engine's own defaults, as before."""
    import harnessrl.engine
    from harnessrl.app.serve import build_engine, serve_plan

    built = []
    monkeypatch.setattr(harnessrl.engine, "make_engine", lambda cfg: built.append(cfg))
    run = _train_run_dir(tmp_path / "train", [*TRAINED, "engine.type=vllm_server", "engine.max_batch=3",
                                              "engine.base_urls=['http://127.0.0.1:9']", "engine.dtype=bfloat16"])
    plan = serve_plan(None, run, {"engine": "hf", "max_model_len": 512}, None)
    build_engine(plan.engine, tmp_path, plan.cfg.engine.max_model_len, settings=plan.engine_settings)
    build_engine("hf", tmp_path, None)
    (named, plain) = built
    assert (named.type, named.model, named.max_batch, named.dtype, named.max_model_len, named.base_urls) == \
        ("hf", str(tmp_path), 3, "bfloat16", 512, None)
    assert plain == {"type": "hf", "model": str(tmp_path)}


def test_serve_from_run_serves_as_the_run_trained(tmp_path):
    """The real command (`serve --from-run DIR --engine scripted` in a subprocess): the serving record
    it stores is the one the run's stored config makes, its model is the run's, and a call asking
    for 32k tokens and no temperature is served with the run's cap and default."""
    import json
    import shutil

    import httpx

    from harnessrl.engine.model import smollm2_tokenizer_dir
    from tests.proxy.test_cli import start_serve

    model = tmp_path / "trained-model"  # the tokenizer only (the scripted engine loads no weights)
    shutil.copytree(smollm2_tokenizer_dir(), model, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
    (model / "config.json").write_text(json.dumps({"max_position_embeddings": 2048}))
    run = _train_run_dir(tmp_path / "train", [*TRAINED, "serve.max_tokens_mode=force", f"model.path={model}"])
    with RunStore(run) as store:
        stored = RunConfig.model_validate(store.get_meta("config"))
    out = tmp_path / "served"
    proc, urls = start_serve(out, "--from-run", str(run))
    try:
        reply = httpx.post(f"{urls['openai']}/chat/completions", timeout=60,
                           json={"model": "m", "max_tokens": 32000, "messages": [{"role": "user", "content": "hi"}]})
        assert reply.status_code == 200
        assert httpx.get(f"{urls['anthropic']}/health", timeout=60).json()["model"] == "policy"  # its checkpoint's
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    with RunStore(out) as store:
        assert store.get_meta("serve") == stored.serve.policy().model_dump(mode="json")
        assert store.get_meta("render") == {"tool_format": stored.render.tool_format, "history": "exact"}
        (call,) = store.list_calls()
    assert (call.temperature, call.meta["sampling"]["max_tokens"]) == (0.45, 64)


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
    assert (cfg.serve.max_tokens, cfg.render.tool_format) == (32, "bash_examples")


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
