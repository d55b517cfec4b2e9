"""One weight-sync path (train/weight_sync.py): the cast to the compute dtype, the rank split, refs
only to engines that take them, and a grep that no other module pushes a trainer's weights."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from harnessrl.train.weight_sync import RefWeightsEngine, rank_served_weights, send_weights  # noqa: E402

SRC = Path(__file__).resolve().parents[2] / "src" / "harnessrl"


class Source:
    def __init__(self, weights, compute_dtype):
        self.weights, self.compute_dtype = weights, compute_dtype

    def named_weights(self):
        return iter(self.weights)


class Recording:
    def __init__(self):
        self.got: list = []

    def update_weights(self, named_tensors, version):
        self.got.append((named_tensors, version))


class TakesRefs(Recording):
    def shareable(self, named_tensors):
        return named_tensors


def _weights():
    return [("w", torch.randn(3, 3, requires_grad=True)), ("steps", torch.arange(4))]


def test_served_weights_are_cast_to_the_compute_dtype_and_detached():
    sent = rank_served_weights(Source(_weights(), torch.bfloat16), on_cpu=True)
    assert [(n, t.dtype) for n, t in sent] == [("w", torch.bfloat16), ("steps", torch.int64)]
    assert not any(t.requires_grad for _, t in sent)
    engine = Recording()
    send_weights(engine, sent, 7)
    assert engine.got == [(sent, 7)]


def test_full_precision_compute_sends_the_master_weights_unchanged():
    w = _weights()
    sent = rank_served_weights(Source(w, None), on_cpu=False)
    assert torch.equal(sent[0][1], w[0][1].detach()) and sent[0][1].dtype == torch.float32


def test_a_rank_that_only_took_part_in_the_gather_sends_nothing():
    assert rank_served_weights(Source([], torch.bfloat16), on_cpu=True) == []


def test_only_an_engine_that_takes_refs_gets_a_non_list():
    marker = object()  # stands for a Ray object ref
    engine = TakesRefs()
    assert isinstance(engine, RefWeightsEngine) and not isinstance(Recording(), RefWeightsEngine)
    send_weights(engine, marker, 2)
    assert engine.got == [(marker, 2)]


def _calls(path: Path, name: str) -> bool:
    """Whether the module calls `name(...)` or `<something>.name(...)` (code only, not docstrings)."""
    calls = (n.func for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call))
    return any((isinstance(f, ast.Attribute) and f.attr == name) or (isinstance(f, ast.Name) and f.id == name)
               for f in calls)


def test_nothing_else_pushes_weights_into_an_engine():
    """`engine.update_weights(...)` is called by weight_sync.send_weights alone, outside the engines'
    own replica fan-out (engine/); every trainer's sync goes through the two halves."""
    modules = {p.relative_to(SRC).as_posix(): p for p in SRC.rglob("*.py")}
    pushers = {rel for rel, p in modules.items() if _calls(p, "update_weights") and not rel.startswith("engine/")}
    assert pushers == {"train/weight_sync.py"}
    syncs = {rel for rel, p in modules.items() if "def sync_weights(" in p.read_text()}
    assert syncs == {"train/protocol.py", "train/trainer.py", "cluster/ray_trainer.py"}
    assert {rel for rel, p in modules.items() if _calls(p, "rank_served_weights")} == \
        {"train/trainer.py", "cluster/ray_trainer.py"}
    assert {rel for rel, p in modules.items() if _calls(p, "send_weights")} == \
        {"train/trainer.py", "cluster/ray_trainer.py"}
