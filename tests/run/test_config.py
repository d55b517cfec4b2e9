"""Run config: every shipped config validates (through the CLI), overrides, clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harnessrl.app.main import app
from harnessrl.config import ConfigError, apply_override, load_config

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))


def test_every_shipped_config_validates_via_cli():
    assert any(p.name == "demo.yaml" for p in CONFIGS)
    res = CliRunner().invoke(app, ["config", "validate", "--schema-only", *map(str, CONFIGS)])
    assert res.exit_code == 0, res.output
    assert res.output.count("ok") == len(CONFIGS)


def test_validate_reports_bad_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("loop:\n  steps: -1\nalgorithm:\n  name: dpo\n")
    res = CliRunner().invoke(app, ["config", "validate", str(bad)])
    assert res.exit_code == 1
    assert "loop.steps" in res.output and "algorithm.name" in res.output


def test_overrides_dotted_lists_and_yaml_values():
    cfg = load_config(CONFIGS[0].parent / "demo.yaml", ["loop.steps=7", "harnesses.1.weight=3",
                                                         "algorithm.dual_clip=2.5", "model.lora={r: 4}"])
    assert cfg.loop.steps == 7 and cfg.harnesses[1].weight == 3.0
    assert cfg.algorithm.dual_clip == 2.5 and cfg.model.lora.r == 4
    with pytest.raises(ConfigError, match="index"):
        apply_override({"a": [1]}, "a.5=2")
    with pytest.raises(ConfigError, match="key.sub=value"):
        load_config(None, ["loop.steps"])
    with pytest.raises(ConfigError, match="distinct"):
        load_config(None, ["harnesses=[{name: a}, {name: a}]"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config("/nonexistent.yaml")
    assert load_config(None).render.tool_format is None  # the chat template's own convention
    assert load_config(None, ["render.tool_format=bash"]).render.tool_format == "bash"
    with pytest.raises(ConfigError, match="render.tool_format"):
        load_config(None, ["render.tool_format=zsh"])


def test_train_cli_config_error_is_a_message_not_a_traceback(tmp_path):
    res = CliRunner().invoke(app, ["train", "--config", str(tmp_path / "none.yaml")])
    assert res.exit_code == 2 and "config error" in res.output and "Traceback" not in res.output


def test_components_embed_their_own_models():
    from harnessrl.engine.factory import EngineSettings
    from harnessrl.train.settings import PPOSettings
    from harnessrl.tree.filters import FilterConfig

    cfg = load_config(None, ["filters.max_path_tokens=64", "algorithm.is_mode=mis", "engine.max_batch=4"])
    assert isinstance(cfg.engine, EngineSettings) and cfg.engine.max_batch == 4
    assert isinstance(cfg.filters, FilterConfig) and cfg.filters.max_path_tokens == 64
    assert isinstance(cfg.algorithm, PPOSettings) and cfg.algorithm.is_mode == "mis"
    with pytest.raises(ConfigError, match="model.path"):
        load_config(None, ["engine.model=/some/dir"])
    with pytest.raises(ConfigError, match="engine it can update"):
        load_config(None, ["engine.type=scripted"])


def test_engine_section_keeps_the_run_defaults_when_one_key_is_set():
    """Setting one engine key keeps the run's other defaults (type auto, 16 rows), not the bare engine's."""
    assert load_config(None, ["engine.dtype=float32"]).engine.model_dump(include={"type", "max_batch"}) == \
        {"type": "auto", "max_batch": 16}
    built = load_config(None, ["engine.type=hf", "engine.seed=3"]).engine.for_model("/m", seed=5)
    assert (built.type, built.model, built.seed, built.max_batch) == ("hf", "/m", 5, 16)


@pytest.mark.parametrize("key, value, fix", [("engine.model", "/some/dir", "model.path"),
                                             ("engine.base_url", "http://127.0.0.1:1", "base_urls"),
                                             ("engine.eos_ids", "[7]", "stop tokens")])
def test_keys_a_run_sets_itself_are_refused_unless_left_at_their_default(key, value, fix):
    with pytest.raises(ConfigError, match=fix):
        load_config(None, [f"{key}={value}"])
    assert "model" not in load_config(None, ["engine.model=null", "engine.eos_ids=[2]"]).engine.model_dump()


def test_value_coef_is_gone_with_a_warning():
    with pytest.warns(FutureWarning, match="critic_lr"):
        cfg = load_config(None, ["algorithm.value_coef=0.5"])
    assert "value_coef" not in cfg.algorithm.model_dump()


def test_old_keys_migrate_with_a_warning(tmp_path):
    old = tmp_path / "old.yaml"
    old.write_text("engine:\n  max_concurrency: 5\nloop:\n  temperature: 0.7\n  steps: 2\noutput:\n  save_final: false\n")
    with pytest.warns(FutureWarning) as seen:
        cfg = load_config(old)
    assert cfg.engine.max_batch == 5 and cfg.loop.steps == 2
    text = " | ".join(str(w.message) for w in seen)
    assert "engine.max_concurrency is now engine.max_batch" in text
    assert "loop.temperature was removed" in text and "output.save_final was removed" in text
    assert "temperature" not in cfg.loop.model_dump() and "save_final" not in cfg.output.model_dump()
    with pytest.raises(ConfigError, match="both set"):
        load_config(None, ["engine.max_concurrency=2", "engine.max_batch=3"])


def test_moved_keys_migrate_with_a_warning_at_any_depth():
    """loop.max_tokens is serve.max_tokens (beside its mode), loop.branching.policy is
    loop.branching.placement ("policy" names the trained model only): old configs load, with a
    FutureWarning that names both keys; setting both names is refused."""
    import pytest

    from harnessrl.config import ConfigError, load_config

    with pytest.warns(FutureWarning, match="loop.max_tokens is now serve.max_tokens"):
        cfg = load_config(None, ["loop.max_tokens=48"])
    assert cfg.serve.max_tokens == 48 and cfg.serve.policy().max_tokens_cap == 48
    with pytest.warns(FutureWarning, match="loop.branching.policy is now loop.branching.placement"):
        cfg = load_config(None, ["loop.branching={points: 1, policy: entropy}"])
    assert cfg.loop.branching.placement == "entropy"
    with pytest.raises(ConfigError, match="keep only serve.max_tokens"):
        load_config(None, ["loop.max_tokens=48", "serve.max_tokens=64"])
