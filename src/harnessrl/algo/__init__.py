"""Advantage estimators on prefix trees (pure Python + numpy; no torch/vllm/transformers).

    from harnessrl.algo import grpo, tree_grpo, gae
    adv = grpo(tree)                      # TokenAdvantages, CSR over tree.flat() tokens
    adv.adv_pos, adv.adv_neg, adv.weight_sum, adv.norm   # what the PPO loss needs per token

The run's choice of estimator (with trained rewards and per-harness shares) is made in one place,
`algo.estimator`; what a step trained is kept for the views by `algo.trained`.
"""

from harnessrl.algo.advantages import ESTIMATORS, gae, gae_1d, grpo, normalize_rewards, tree_grpo
from harnessrl.algo.contributions import LOSS_AGGS, TokenAdvantages, decision_counts, whiten

__all__ = [
    "ESTIMATORS", "LOSS_AGGS", "TokenAdvantages", "decision_counts", "gae", "gae_1d", "grpo",
    "normalize_rewards", "tree_grpo", "whiten",
]
