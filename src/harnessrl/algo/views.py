"""The (tree, advantages) pairs the tree views show, and the HTML page of them.

"trained": the pairs a training step trained, as it saved them (algo/trained.py); otherwise the
group trees of the store with advantages recomputed by one estimator's defaults. The run's
`trees.html` and `harnessrl tree show` read them here.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from harnessrl.algo.contributions import TokenAdvantages
from harnessrl.algo.estimator import EstimatorOnly, estimate
from harnessrl.algo.trained import load_trained, trained_steps, tree_fingerprint
from harnessrl.tree.decode import Decoder
from harnessrl.tree.filters import FilterConfig
from harnessrl.tree.run_trees import iter_group_trees, rebuild_trees
from harnessrl.tree.nodes import PrefixTree
from harnessrl.tree.view_text import ShownAdvantages

if TYPE_CHECKING:
    from harnessrl.store.run_store import RunStore

ESTIMATOR_CHOICES = ("trained", "grpo", "tree_grpo", "none")

Pair = tuple[PrefixTree, ShownAdvantages | None]  # (tree, its advantages: TokenAdvantages, a trained view, or None)


def recomputed(tree: PrefixTree, estimator: str) -> TokenAdvantages | None:
    """Advantages recomputed on a tree with the estimator's own defaults (None: "none")."""
    return None if estimator == "none" else estimate(tree, EstimatorOnly(estimator))


def trained_pairs(store: RunStore, step: int | None = None, task: str | None = None,
                  group: str | None = None) -> Iterator[Pair]:
    """(tree, advantages) as the training steps trained them (of `step`, else of every step the run
    recorded): each tree rebuilt from the store with the step's rewards and filters, and checked
    against the trained tree's fingerprint. Nothing for runs that trained no step."""
    for s in [step] if step is not None else trained_steps(store.run_dir):
        trained = load_trained(store.run_dir, s)
        if trained is None:
            continue
        wanted = {t.group_id: t for t in trained.trees if group is None or t.group_id == group}
        rewards = {gid: t.rewards for gid, t in wanted.items()}
        for gid, tree in rebuild_trees(store, s, rewards, FilterConfig(**trained.filters)):
            if task is not None and tree.task_id != task:
                continue
            if tree_fingerprint(tree) != wanted[gid].fingerprint:
                raise ValueError(f"group {gid} of step {s}: the stored calls no longer build the tree it trained")
            yield tree, wanted[gid].view


def tree_pairs(store: RunStore, task: str | None, group: str | None, step: int | None, estimator: str,
               show_all: bool) -> Iterator[Pair]:
    """(tree, advantages or None) of the matching groups. "trained": the trained pairs where the run
    recorded them (training runs; the step's own filters, so `show_all` does not apply), else grpo."""
    steps = trained_steps(store.run_dir)
    if estimator == "trained" and (step in steps if step is not None else steps):
        yield from trained_pairs(store, step, task, group)
        return
    for _, _, tree in iter_group_trees(store, task=task, group=group, step=step,
                                       filters=FilterConfig(prune=not show_all)):
        yield tree, recomputed(tree, "grpo" if estimator == "trained" else estimator)


def write_tree_page(store: RunStore, out: Path, title: str, decode: Decoder, task: str | None = None,
                    group: str | None = None, step: int | None = None, estimator: str = "trained",
                    show_all: bool = False) -> int:
    """One self-contained HTML page with the trees of the matching groups (`tree_pairs`); returns how many."""
    from harnessrl.tree.view_html import page, tree_html

    pages = [tree_html(tree, decode, adv) for tree, adv in tree_pairs(store, task, group, step, estimator, show_all)]
    if pages:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(page(pages, title), encoding="utf-8")
        tmp.replace(out)
    return len(pages)
