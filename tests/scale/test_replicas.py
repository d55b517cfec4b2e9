"""Engine data parallelism: 2 tiny HF replicas (CPU) behind ReplicatedEngine; routing, weight sync,
policy version = min over replicas; a failing replica keeps the version back."""

from __future__ import annotations

import asyncio

import pytest

from harnessrl.engine.base import EngineError, SamplingParams
from harnessrl.engine.replicas import ReplicatedEngine, rendezvous
from harnessrl.engine.scripted import ScriptedEngine

pytestmark = pytest.mark.scale


def test_rendezvous_is_stable_and_spreads():
    keys = [f"rollout-{i}" for i in range(400)]
    picks = [rendezvous(k, 2) for k in keys]
    assert picks == [rendezvous(k, 2) for k in keys]
    assert 120 < picks.count(0) < 280
    # adding a third replica moves only keys that now pick it
    assert all(rendezvous(k, 3) in (p, 2) for k, p in zip(keys, picks))


def _scripted(n: int) -> list[ScriptedEngine]:
    return [ScriptedEngine(lambda ids, i=i: [100 + i], eos_ids=(2,)) for i in range(n)]


async def test_affinity_and_version_over_scripted_replicas():
    reps = _scripted(2)
    eng = ReplicatedEngine(reps)
    keys = [f"r{i}" for i in range(12)]
    first = {}
    for _ in range(3):  # three turns of twelve rollouts
        for k in keys:
            g = await eng.generate([1, 2, 3], SamplingParams(max_tokens=4, route_key=k))
            first.setdefault(k, g.timings["replica"])
            assert g.timings["replica"] == first[k]  # one rollout, one replica
            assert g.token_ids == [100 + int(first[k])]
    assert set(first.values()) == {0.0, 1.0}
    # keyless requests go to the least loaded replica
    await asyncio.gather(*(eng.generate([1], SamplingParams(max_tokens=2)) for _ in range(4)))
    assert eng.policy_version == 0
    eng.update_weights([("w", 0)], 3)
    assert eng.policy_version == 3 and all(r.policy_version == 3 for r in reps)


class _Broken(ScriptedEngine):
    def update_weights(self, named_tensors, version):
        raise RuntimeError("disk full")


async def test_failed_replica_keeps_version_back():
    good, bad = ScriptedEngine([[5]]), _Broken([[5]])
    eng = ReplicatedEngine([good, bad])
    with pytest.raises(EngineError, match="replica 1: RuntimeError: disk full"):
        eng.update_weights([("w", 0)], 1)
    assert good.policy_version == 1 and eng.policy_version == 0


@pytest.mark.timeout(600)
async def test_two_tiny_hf_replicas(tmp_path):
    torch = pytest.importorskip("torch")
    from harnessrl.engine import EngineConfig, make_engine
    from harnessrl.engine.model import make_tiny_model

    model_dir = make_tiny_model(tmp_path / "tiny", seed=0)
    eng = make_engine(EngineConfig(type="hf", model=str(model_dir), replicas=2, max_model_len=256, num_threads=1))
    try:
        assert isinstance(eng, ReplicatedEngine) and len(eng.replicas) == 2
        prompt = [1, 5, 9, 14, 20]
        greedy = SamplingParams(temperature=1e-4, max_tokens=6)
        keys = [k for k in (f"k{i}" for i in range(40))]
        k0 = next(k for k in keys if rendezvous(k, 2) == 0)
        k1 = next(k for k in keys if rendezvous(k, 2) == 1)
        a = await eng.generate(prompt, SamplingParams(**{**greedy.__dict__, "route_key": k0}))
        b = await eng.generate(prompt, SamplingParams(**{**greedy.__dict__, "route_key": k1}))
        assert (a.timings["replica"], b.timings["replica"]) == (0.0, 1.0)
        assert a.token_ids == b.token_ids  # same weights, greedy
        # weight sync reaches both replicas: a perturbed model changes both replicas' greedy output
        from transformers import AutoModelForCausalLM

        m = AutoModelForCausalLM.from_pretrained(model_dir)
        torch.manual_seed(1)
        new = [(k, v + 0.5 * torch.randn_like(v)) if v.is_floating_point() else (k, v)
               for k, v in m.state_dict().items()]
        eng.update_weights(new, 1)
        assert eng.policy_version == 1
        a2 = await eng.generate(prompt, SamplingParams(**{**greedy.__dict__, "route_key": k0}))
        b2 = await eng.generate(prompt, SamplingParams(**{**greedy.__dict__, "route_key": k1}))
        assert a2.policy_version == b2.policy_version == 1
        assert a2.token_ids == b2.token_ids != a.token_ids
    finally:
        eng.close()
