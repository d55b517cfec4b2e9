"""One name per estimator: the config's `algorithm.name` keys ESTIMATORS, names the advantages, and is
what a run stores; a run stored before the rename (ppo written as "gae") reads back as "ppo"."""

from __future__ import annotations

import json
import typing

import numpy as np

from harnessrl.algo import ESTIMATORS
from harnessrl.algo.estimator import ESTIMATOR_NAMES, EstimatorOnly, estimate
from harnessrl.algo.trained import load_trained, save_trained, trained_path
from harnessrl.config import AlgorithmConfig

from .test_advantages import small_tree


def test_estimators_are_keyed_by_the_config_names():
    names = typing.get_args(AlgorithmConfig.model_fields["name"].annotation)
    assert tuple(ESTIMATORS) == ESTIMATOR_NAMES == names == ("grpo", "tree_grpo", "ppo")


def test_each_estimator_names_its_advantages_by_its_key():
    tree = small_tree()
    values = np.zeros(len(tree.flat()))
    for name in ESTIMATORS:
        adv = estimate(tree, EstimatorOnly(name), values if name == "ppo" else None)
        assert adv.estimator == name


def test_a_run_stored_with_the_old_name_reads_as_ppo(tmp_path):
    tree = small_tree()
    adv = estimate(tree, EstimatorOnly("ppo"), np.zeros(len(tree.flat())))
    path = save_trained(tmp_path, 3, {}, [tree], [adv])
    assert load_trained(tmp_path, 3).trees[0].view.estimator == "ppo"
    with np.load(path, allow_pickle=False) as data:  # rewrite the file as an older run wrote it
        arrays = {k: data[k] for k in data.files}
    meta = json.loads(str(arrays["meta"]))
    meta["trees"][0]["estimator"] = "gae"
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez_compressed(trained_path(tmp_path, 3), **arrays)
    assert load_trained(tmp_path, 3).trees[0].view.estimator == "ppo"
