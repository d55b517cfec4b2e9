"""The real default model: built from the GGUF, served by HFEngine, logits equal the GGUF model's."""

from __future__ import annotations

import json

import pytest
import torch

from harnessrl.engine.base import SamplingParams

from .real_model_utils import chat_prompt_ids, hf_logprobs

pytestmark = pytest.mark.model


async def test_default_model_builds_and_generates():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from harnessrl.engine.hf import HFEngine
    from harnessrl.engine.model import gguf_path, resolve_model

    path = resolve_model(None)
    assert resolve_model("smollm2-135m-instruct") == path
    config = json.loads((path / "config.json").read_text())
    assert "quantization_config" not in config and config["num_hidden_layers"] == 30
    prompt = chat_prompt_ids(path, "What is the capital of France? Answer in one word.")
    engine = HFEngine(str(path), max_model_len=1024)
    try:
        gen = await engine.generate(prompt, SamplingParams(temperature=0.0, max_tokens=24))
    finally:
        engine.close()
    tok = AutoTokenizer.from_pretrained(path)
    assert "paris" in tok.decode(gen.token_ids).lower()
    if gen.finish_reason == "stop":
        assert gen.token_ids[-1] == tok.eos_token_id
    gguf = gguf_path()
    reference = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    expected = hf_logprobs(reference, prompt, gen.token_ids, 1.0)
    assert torch.allclose(torch.tensor(gen.logprobs), expected, atol=1e-3)
