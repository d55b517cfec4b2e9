"""FSDP2 trainer on 2 gloo processes (torchrun) == the one-process step: loss, gradients, weights
gathered for sync and into an HF checkpoint; full fine-tuning, LoRA, MIS with 2 epochs; a sharded
AdamW trainer resumed from its checkpoint takes the one-process second step."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.modules import load_file

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

pytestmark = pytest.mark.scale

HERE = Path(__file__).resolve().parent
SRC = HERE.parents[1] / "src"


def _worker():
    return load_file("fsdp_worker", HERE / "fsdp_worker.py")


def _torchrun(tmp_path: Path, case: str) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           str(HERE / "fsdp_worker.py"), str(tmp_path), case]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return torch.load(tmp_path / "rank0.pt", weights_only=False)


@pytest.mark.parametrize("case", ["full", "lora", "mis_epochs", "resume"])
def test_two_rank_step_equals_one_process(tmp_path, case):
    w = _worker()
    got = _torchrun(tmp_path, case)
    assert got["world"] == 2
    ref = w.build(case)
    before = w.trainable(ref.policy)
    m = dataclasses.asdict(ref.update(w.batch()))
    after = w.trainable(ref.policy)
    assert m["chunks"] >= 3  # several chunks, spread over the ranks
    for key in ("loss", "tokens_trained", "grad_norm", "clip_frac", "kl"):
        if m.get(key) is None:  # kl without a reference model is left unrecorded on both sides
            assert got["metrics"].get(key) is None, key
        else:
            assert got["metrics"][key] == pytest.approx(m[key], rel=1e-5, abs=1e-7), key
    assert set(got["before"]) == set(before)
    for k in before:
        assert torch.equal(got["before"][k], before[k]), k  # same start
        g_ref, g_got = before[k] - after[k], got["before"][k] - got["after"][k]  # SGD lr=1: the gradient
        assert g_ref.abs().max() > 0 or case == "lora", k
        tol = {"rtol": 1e-3, "atol": 1e-5} if case == "resume" else {"rtol": 1e-4, "atol": 1e-6}  # Adam: g/|g|
        assert torch.allclose(g_got, g_ref, **tol), (k, float((g_got - g_ref).abs().max()))
    # weights gathered for engine sync: plain HF names, LoRA merged, equal to the one-process merge
    from harnessrl.train.weights import hf_named_weights

    ref_w = dict(hf_named_weights(ref.policy))
    assert set(got["weights"]) == set(ref_w)
    for k, v in ref_w.items():
        assert torch.allclose(got["weights"][k], v, rtol=1e-5, atol=1e-6), (k, float((got["weights"][k] - v).abs().max()))
    # the gathered checkpoint is a plain HF dir that transformers loads
    from transformers import AutoModelForCausalLM

    ckpt = Path(got["ckpt"])
    assert ckpt == tmp_path / "run" / "checkpoints" / "step_000001"
    assert (ckpt / "trainer.pt").is_file() and not ckpt.with_name(ckpt.name + ".tmp").exists()
    loaded = AutoModelForCausalLM.from_pretrained(ckpt / "policy")
    sd = loaded.state_dict()
    for k, v in ref_w.items():
        assert torch.allclose(sd[k], v, rtol=1e-5, atol=1e-6), k
    if case == "resume":  # the optimizer state came back: the second step is the one-process second step
        ref.update(w.batch(5))
        second = dict(hf_named_weights(ref.policy))
        for k, v in second.items():
            assert not torch.allclose(v, got["weights"][k]), k  # the second step moved it
            assert torch.allclose(got["resumed"][k], v, rtol=1e-3, atol=1e-5), (k, float((got["resumed"][k] - v).abs().max()))
