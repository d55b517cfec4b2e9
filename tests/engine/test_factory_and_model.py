"""EngineConfig/make_engine, model resolution, the `model prepare` command, light imports."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import typer
from pydantic import ValidationError
from typer.testing import CliRunner

from harnessrl.engine import EngineConfig, ScriptedEngine, make_engine
from harnessrl.engine.model import ModelNotFound, build_once, resolve_model


def test_package_import_stays_light():
    code = "import sys, harnessrl.engine; print(sorted(m for m in ('torch','transformers','vllm') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_engine_config_validation_and_scripted():
    with pytest.raises(ValidationError):
        EngineConfig(type="nope")
    with pytest.raises(ValidationError):
        EngineConfig(type="hf", max_batch=0)
    with pytest.raises(ValidationError):
        EngineConfig(type="hf", unknown_field=1)
    eng = make_engine({"type": "scripted", "script": [[4, 5]]})
    assert isinstance(eng, ScriptedEngine)
    with pytest.raises(ValueError, match="base_url"):
        make_engine(EngineConfig(type="vllm_server"))


async def test_make_engine_hf_on_a_local_dir(tiny_model_dir):
    from harnessrl.engine.base import SamplingParams

    eng = make_engine(EngineConfig(type="hf", model=str(tiny_model_dir), max_model_len=32))
    try:
        assert eng.max_model_len == 32 and eng.model_path == str(tiny_model_dir.resolve())
        gen = await eng.generate([1, 2, 3], SamplingParams(temperature=0.0, max_tokens=3))
        assert len(gen.token_ids) == 3
    finally:
        eng.close()


def test_resolve_model_local_dir_and_errors(tiny_model_dir, tmp_path):
    assert resolve_model(tiny_model_dir) == tiny_model_dir.resolve()
    with pytest.raises(ModelNotFound, match="config.json"):
        resolve_model(tmp_path)
    with pytest.raises(ModelNotFound, match="huggingface-cli download"):
        resolve_model("no-such-org/no-such-model-xyz")
    with pytest.raises(ModelNotFound, match="neither"):
        resolve_model("not a model")


def test_tiny_model_is_deterministic_and_loads(tiny_model_dir, tmp_path):
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    from harnessrl.engine.model import make_tiny_model

    again = make_tiny_model(tmp_path / "again", seed=0)
    other = make_tiny_model(tmp_path / "other", seed=1)
    a, b, c = (load_file(d / "model.safetensors") for d in (tiny_model_dir, again, other))
    key = "model.layers.0.self_attn.q_proj.weight"
    assert (a[key] == b[key]).all() and not (a[key] == c[key]).all()
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    ids = tok.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False
    )
    assert ids.endswith("<|im_start|>assistant\n") and tok.eos_token == "<|im_end|>"


def test_build_once_builds_once_under_concurrency(tmp_path):
    calls: list[int] = []

    def slow_build(out: Path) -> None:
        calls.append(1)
        time.sleep(0.2)
        (out / "config.json").write_text("{}")

    target = tmp_path / "models" / "m"
    target.parent.mkdir()
    results: list[Path] = []
    threads = [
        threading.Thread(target=lambda: results.append(build_once(target, slow_build))) for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and results == [target] * 4 and (target / "config.json").is_file()
    leftovers = [p.name for p in target.parent.iterdir() if "building" in p.name]
    assert leftovers == []


def test_failed_build_leaves_nothing(tmp_path):
    def broken(out: Path) -> None:
        (out / "half").write_text("x")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        build_once(tmp_path / "m", broken)
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == []


def _cli() -> typer.Typer:
    from harnessrl.app.model import register

    app = typer.Typer()
    app.command("noop")(lambda: None)
    register(app)
    return app


def test_model_prepare_command(tiny_model_dir):
    runner = CliRunner()
    ok = runner.invoke(_cli(), ["model", "prepare", "--model", str(tiny_model_dir)])
    assert ok.exit_code == 0, ok.output
    assert str(tiny_model_dir.resolve()) in ok.output
    bad = runner.invoke(_cli(), ["model", "prepare", "--model", "no-such-org/nothing-here"])
    assert bad.exit_code == 2
    assert "huggingface-cli" in bad.output and "Traceback" not in bad.output


def test_cpu_bf16_detection_reads_the_flags_line():
    from harnessrl.engine.factory import cpu_has_bf16

    avx2 = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma\nbugs\t\t: spectre_v1\n"
    amx = "processor\t: 0\nflags\t\t: fpu avx2 avx512f amx_tile amx_bf16\n"
    zen4 = "flags\t\t: avx2 avx512f avx512_bf16\n"
    assert not cpu_has_bf16(avx2)
    assert cpu_has_bf16(amx) and cpu_has_bf16(zen4)
    assert not cpu_has_bf16("")  # no flags line (not Linux-x86): no native bf16 assumed


def test_resolved_dtype_names_what_the_engine_serves_in():
    from harnessrl.engine.factory import EngineConfig, resolved_dtype

    assert resolved_dtype(EngineConfig(type="hf")) == "float32"
    assert resolved_dtype(EngineConfig(type="vllm", dtype="bfloat16")) == "bfloat16"
    assert resolved_dtype(EngineConfig(type="scripted")) == "auto"  # no dtype of its own


def test_a_vllm_engine_gets_the_prefix_cache_setting(monkeypatch, tiny_model_dir):
    """engine.prefix_caching reaches VLLMEngine (on by default; off only to measure what it saves)."""
    import sys
    import types

    from harnessrl.engine.factory import EngineSettings, _make_vllm

    seen = []
    fake = types.ModuleType("harnessrl.engine.vllm_engine")
    fake.VLLMEngine = lambda path, **kw: seen.append(kw) or kw  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "harnessrl.engine.vllm_engine", fake)
    _make_vllm(EngineSettings(type="vllm").for_model(str(tiny_model_dir)))
    _make_vllm(EngineSettings(type="vllm", prefix_caching=False).for_model(str(tiny_model_dir)))
    assert [kw["prefix_caching"] for kw in seen] == [True, False]
