"""benchmarks/gpu_smoke.py stays runnable: its equivalence check, CPU dry run (SDPA tree mask)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.modules import load_file

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = pytest.mark.scale


def _smoke():
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_smoke.py"
    return load_file("gpu_smoke", path)


def test_tree_packing_matches_per_path_on_cpu():
    res = _smoke().equivalence(torch.device("cpu"), "sdpa", quick=True)
    assert res["tree_tokens"] < res["path_tokens"]
    assert res["chunked"]["chunks"] > 1
    for case in ("one_chunk", "chunked"):
        assert res[case]["max_abs_logp_diff"] < 1e-4, res
        assert res[case]["max_rel_grad_diff"] < 1e-3, res
    assert res["ok"]
