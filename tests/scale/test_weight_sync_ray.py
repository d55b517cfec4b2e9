"""One weight sync for every trainer backend (train/weight_sync.py), on Ray: a trainer of 2 FSDP2
ranks (gloo) in Ray actors, computing in bf16, syncs into an engine on the driver. The engine gets
every HF weight once, cast to bf16, equal to the fp32 master weights rounded; an engine whose
replicas fetch from the object store gets one ref instead."""

from __future__ import annotations

import warnings
from functools import partial

import pytest

ray = pytest.importorskip("ray")
torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.scale, pytest.mark.timeout(600)]


class Recording:
    """A bf16 engine as the sync sees it: it records what it is given."""

    def __init__(self):
        self.got: list = []

    def update_weights(self, named_tensors, version):
        self.got.append((named_tensors, version))


class TakesRefs(Recording):
    def shareable(self, named_tensors):
        return named_tensors


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    from harnessrl.engine import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=5)


def test_two_rank_ray_trainer_syncs_bf16_weights(tiny_dir, tmp_path, cluster):
    from transformers import AutoModelForCausalLM

    from harnessrl.cluster.ray_trainer import start_trainer
    from harnessrl.config import load_config
    from harnessrl.run.trainer_setup import make_sharded_trainer

    warnings.simplefilter("ignore")
    cfg = load_config(None, [f"model.path={tiny_dir}", "engine.type=hf", "sandbox.type=local",
                             "model.compute_dtype=bfloat16", f"output.run_dir={tmp_path / 'run'}",
                             "output.tensorboard=false"])
    trainer = start_trainer(partial(make_sharded_trainer, cfg, tiny_dir, tiny_dir, None, seed=0), world=2)
    try:
        engine = Recording()
        trainer.sync_weights(engine, 3)
        [(sent, version)] = engine.got
        assert version == 3
        base = AutoModelForCausalLM.from_pretrained(tiny_dir, torch_dtype=torch.float32).state_dict()
        got = dict(sent)
        assert len(got) == len(sent)  # each weight once
        assert set(got) <= set(base) and len(got) >= len([k for k in base if "rotary" not in k]) - 1
        for name, t in got.items():
            assert t.dtype == torch.bfloat16, name
            assert torch.equal(t, base[name].to(torch.bfloat16)), name

        by_ref = TakesRefs()
        trainer.sync_weights(by_ref, 4)
        [(ref, _)] = by_ref.got
        assert isinstance(ref, ray.ObjectRef)
        assert {k: v.dtype for k, v in ray.get(ref)} == {k: torch.bfloat16 for k in got}
    finally:
        trainer.close()
