"""The one home of the advantage estimator: what a training step trains on, from its groups.

    trees, advs = step_advantages(groups, cfg.algorithm, cfg.filters, critic_values)

per group with recorded calls:
    rollouts = trained_rewards(group, a.reward)        # "score" or "pass" (the eval's pass rule)
    tree     = build_tree(calls, rollouts, filters)
    adv      = estimate(tree, a, values)               # grpo | tree_grpo (= grpo without branches) | ppo: gae(critic values)
    kept when it trains a token (norm > 0, and a non-zero advantage unless ppo or kl_coef > 0)
then over the step: ppo whitens the batch's advantages; per_harness_loss gives each harness an
equal share of the loss (`per_harness_share`).

The settings are the run's `AlgorithmConfig` (harnessrl/config), read through `AdvantageSettings`.
The PPO critic's values come from the trainer (torch): the caller passes them as a function of
the tree, so this module stays torch-free.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from harnessrl.algo.advantages import gae, grpo, tree_grpo
from harnessrl.algo.contributions import TokenAdvantages, whiten
from harnessrl.store.records import CallRecord, PassRule, RolloutRecord, is_scored, rollout_passed
from harnessrl.tree.build import build_tree
from harnessrl.tree.filters import FilterConfig
from harnessrl.tree.nodes import PrefixTree

ESTIMATOR_NAMES = ("grpo", "tree_grpo", "ppo")
CriticValues = Callable[[PrefixTree], np.ndarray]  # the critic's value of every tree token (ppo)


class TaskOfGroup(Protocol):
    @property
    def task(self) -> PassRule | None: ...  # the task the group ran (its pass rule)


class RecordedGroup(Protocol):
    """What the estimator reads of a group (rollout/groups.py PlannedGroup): its task, and its
    recorded rollouts and calls."""

    @property
    def plan(self) -> TaskOfGroup: ...
    @property
    def rollouts(self) -> Sequence[RolloutRecord]: ...
    @property
    def calls(self) -> Sequence[CallRecord]: ...


class AdvantageSettings(Protocol):
    """The fields of `AlgorithmConfig` that choose and shape the advantages."""

    @property
    def name(self) -> str: ...  # grpo | tree_grpo | ppo (GAE over a critic)
    @property
    def reward(self) -> str: ...  # score | pass
    @property
    def std_normalize(self) -> bool: ...  # grpo: divide by the group std (False: Dr.GRPO)
    @property
    def per_harness_norm(self) -> bool: ...
    @property
    def per_harness_loss(self) -> bool: ...
    @property
    def kl_coef(self) -> float: ...
    @property
    def gamma(self) -> float: ...
    @property
    def lam(self) -> float: ...


@dataclass(frozen=True)
class EstimatorOnly:
    """Settings that name the estimator and keep its own defaults (grpo(), tree_grpo(), gae()):
    views that recompute advantages outside a training step (`harnessrl tree show -e grpo`)."""

    name: str
    reward: str = "score"
    std_normalize: bool = True
    per_harness_norm: bool = False
    per_harness_loss: bool = False
    kl_coef: float = 0.0
    gamma: float = 1.0
    lam: float = 1.0


def step_advantages(groups: Sequence[RecordedGroup], a: AdvantageSettings, filters: FilterConfig,
                    critic_values: CriticValues | None = None) -> tuple[list[PrefixTree], list[TokenAdvantages]]:
    """One prefix tree per group with recorded calls, and its advantages (ppo: GAE over
    `critic_values`); trees that train no token (all filtered, or no decision tokens) are dropped."""
    trees, advs = [], []
    for g in groups:
        if not g.rollouts or not g.calls:
            continue
        tree = build_tree(g.calls, trained_rewards(g, a.reward), filters)
        adv = estimate(tree, a, critic_values(tree) if a.name == "ppo" and critic_values else None)
        if adv.norm > 0 and (a.kl_coef > 0 or a.name == "ppo" or has_signal(adv)):
            trees.append(tree)  # a tree whose advantages are all zero has zero policy gradient
            advs.append(adv)
    if a.name == "ppo" and advs:
        advs = whiten(advs)
    if a.per_harness_loss and advs:
        advs = per_harness_share(trees, advs)
    return trees, advs


def estimate(tree: PrefixTree, a: AdvantageSettings, values: np.ndarray | None = None) -> TokenAdvantages:
    """The configured estimator on one tree (before the step's whitening and loss shares);
    ppo needs `values`, the critic's value of every tree token."""
    if a.name == "grpo":
        return grpo(tree, std=a.std_normalize, per_harness=a.per_harness_norm)
    if a.name == "tree_grpo":
        return tree_grpo(tree, std=a.std_normalize, per_harness=a.per_harness_norm)
    if a.name == "ppo":
        if values is None:
            raise ValueError("algorithm ppo needs the critic's values of the tree's tokens")
        return gae(tree, values, gamma=a.gamma, lam=a.lam, per_harness=a.per_harness_norm)
    raise ValueError(f"unknown estimator {a.name!r}: use one of {', '.join(ESTIMATOR_NAMES)}")


def trained_rewards(group: RecordedGroup, mode: str) -> list[RolloutRecord]:
    """The group's rollouts with the reward the policy is trained on: "score" keeps the verifier's
    reward (partial credit included); "pass" is 1 when the rollout passes its task (the eval's pass
    rule, `rollout_passed`) and 0 otherwise. The stored records keep the verifier's score."""
    if mode == "score":
        return list(group.rollouts)
    return [replace(r, reward=float(rollout_passed(r, group.plan.task)))
            if is_scored(r.status, r.reward) else r for r in group.rollouts]


def has_signal(adv: TokenAdvantages) -> bool:
    return bool(np.any(adv.adv_pos != 0) or np.any(adv.adv_neg != 0))


def per_harness_share(trees: list[PrefixTree], advs: list[TokenAdvantages]) -> list[TokenAdvantages]:
    """Rescale path weights so each harness's trees carry an equal share of the loss:
    sum_h (1/H) * loss_h / norm_h, with the batch denominator unchanged."""
    harness = [t.harness for t in trees]
    norm_h: dict[str, float] = {}
    for h, adv in zip(harness, advs):
        norm_h[h] = norm_h.get(h, 0.0) + adv.norm
    total = sum(norm_h.values())
    return [replace(adv, weight=adv.weight * (total / (len(norm_h) * norm_h[h]))) for h, adv in zip(harness, advs)]
