"""What a training step trained, kept in the run directory for the views (trees.html, `tree show`).

    <run_dir>/advantages/step_000001.npz     (save_trained / load_trained)

Per trained tree: the advantages a view shows (`AdvantageView`: the weighted mean advantage per
tree token, node values, per-rollout advantages), a fingerprint of the tree's tokens, and the
rewards the tree was built with; per step: the tree filters. That is what it takes to rebuild
each trained tree from the store exactly and show it with the advantages the step trained, also
for ppo, whose advantages depend on the critic at that step and cannot be recomputed later.
A few bytes per tree token (float32), written once per step.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harnessrl.algo.contributions import TokenAdvantages
from harnessrl.tree.nodes import PrefixTree

DIR = "advantages"
# Estimator names older runs stored, read as today's name (runs before the rename wrote "gae" for ppo).
STORED_NAMES = {"gae": "ppo"}


@dataclass(frozen=True)
class AdvantageView:
    """The part of `TokenAdvantages` the tree views draw (tree/view_html.py, tree/view_text.py)."""

    estimator: str
    adv_mean: np.ndarray  # float32 [tree tokens]: weighted mean advantage (nan where none)
    node_value: np.ndarray | None  # float32 [nodes]
    rollout_adv: dict[str, float] | None

    @classmethod
    def of(cls, adv: TokenAdvantages) -> AdvantageView:
        return cls(adv.estimator, adv.adv_mean, adv.node_value, dict(adv.rollout_adv) if adv.rollout_adv else None)


@dataclass(frozen=True)
class TrainedTree:
    group_id: str
    rewards: dict[str, float | None]  # rollout id -> the reward the tree was built with
    fingerprint: int  # `tree_fingerprint` of the trained tree
    view: AdvantageView


@dataclass(frozen=True)
class TrainedStep:
    step: int
    filters: dict[str, Any]  # the FilterConfig the trees were built with (model_dump)
    trees: list[TrainedTree]


def trained_path(run_dir: str | Path, step: int) -> Path:
    return Path(run_dir) / DIR / f"step_{step:06d}.npz"


def trained_steps(run_dir: str | Path) -> list[int]:
    """The steps whose trained advantages the run directory holds, ascending."""
    found = Path(run_dir, DIR).glob("step_*.npz")
    return sorted(int(p.stem.removeprefix("step_")) for p in found if p.stem.removeprefix("step_").isdigit())


def tree_fingerprint(tree: PrefixTree) -> int:
    """crc32 of the tree's tokens and decision mask in flat order (a rebuilt tree must match it)."""
    flat = tree.flat()
    crc = zlib.crc32(np.ascontiguousarray(flat.tokens, dtype=np.int32).tobytes())
    return zlib.crc32(np.ascontiguousarray(flat.decision, dtype=np.bool_).tobytes(), crc)


def save_trained(run_dir: str | Path, step: int, filters: dict[str, Any], trees: list[PrefixTree],
                 advs: list[TokenAdvantages]) -> Path:
    """Write the step's trained (tree, advantages) pairs (atomically); returns the file."""
    meta: dict[str, Any] = {"step": step, "filters": filters, "trees": []}
    arrays: dict[str, Any] = {}
    for i, (tree, adv) in enumerate(zip(trees, advs, strict=True)):
        view = AdvantageView.of(adv)
        meta["trees"].append({
            "group_id": tree.group_id, "fingerprint": tree_fingerprint(tree), "estimator": view.estimator,
            "rewards": {r.rollout_id: r.reward for r in tree.rollouts.values()},
            "rollout_adv": view.rollout_adv})
        arrays[f"adv_mean_{i}"] = np.asarray(view.adv_mean, dtype=np.float32)
        if view.node_value is not None:
            arrays[f"node_value_{i}"] = np.asarray(view.node_value, dtype=np.float32)
    out = trained_path(run_dir, step)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.stem + ".tmp.npz")
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez_compressed(tmp, **arrays)
    tmp.replace(out)
    return out


def load_trained(run_dir: str | Path, step: int) -> TrainedStep | None:
    """The step's trained pairs as `save_trained` wrote them; None when the run holds none."""
    path = trained_path(run_dir, step)
    if not path.is_file():
        return None
    with np.load(path, allow_pickle=False) as data:
        meta = json.loads(str(data["meta"]))
        trees = [TrainedTree(
            group_id=t["group_id"], rewards=t["rewards"], fingerprint=int(t["fingerprint"]),
            view=AdvantageView(STORED_NAMES.get(t["estimator"], t["estimator"]), data[f"adv_mean_{i}"],
                               data[f"node_value_{i}"] if f"node_value_{i}" in data else None,
                               t["rollout_adv"]))
            for i, t in enumerate(meta["trees"])]
    return TrainedStep(int(meta["step"]), meta["filters"], trees)
