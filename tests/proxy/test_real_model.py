"""The real HFEngine serving SmolLM2-135M-Instruct through the proxy (marker: model)."""

from __future__ import annotations

import pytest

from .helpers import check_stop_string, check_two_sdk_turns

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def hf_engine():
    from harnessrl.engine.hf import HFEngine
    from harnessrl.engine.model import resolve_model

    engine = HFEngine(str(resolve_model(None)), max_model_len=2048, num_threads=2)
    yield engine
    engine.close()


def test_smollm2_through_the_proxy(hf_engine, store):
    check_two_sdk_turns(hf_engine, store, "real-1")



def test_multi_token_stop_string_with_the_real_engine(hf_engine, store, renderer):
    check_stop_string(hf_engine, store, renderer)
