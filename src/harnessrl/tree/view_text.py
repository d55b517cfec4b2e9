"""Terminal view of a prefix tree (rich): span previews, rollouts, values and advantages."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from typing import Protocol

import numpy as np
from rich.console import Group as RichGroup
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from harnessrl.tree.nodes import Node, PrefixTree, RolloutInfo

Decode = Callable[[Sequence[int]], str]



class ShownAdvantages(Protocol):
    """What the tree views draw of a tree's advantages (algo/: `TokenAdvantages`, or the trained
    `AdvantageView` a step saved): per-token mean advantage, per-node value, per-rollout scalar."""

    @property
    def adv_mean(self) -> np.ndarray | None: ...

    @property
    def node_value(self) -> np.ndarray | None: ...

    @property
    def rollout_adv(self) -> Mapping[str, float] | None: ...


def ids_decode(ids: Sequence[int]) -> str:
    """Fallback decoder when no tokenizer is available: the ids themselves."""
    return " ".join(str(int(i)) for i in ids)


def preview(text: str, width: int) -> str:
    """One line: newlines shown as ⏎, long text cut in the middle."""
    flat = text.replace("\r", "").replace("\n", "⏎")
    if len(flat) <= width:
        return flat
    head = max(1, width * 2 // 3)
    return flat[:head] + " … " + flat[-(width - head - 3):]


def node_label(tree: PrefixTree, node_id: int, decode: Decode, width: int, adv_mean: np.ndarray | None,
               node_value: np.ndarray | None) -> Text:
    node = tree.nodes[node_id]
    flat = tree.flat()
    lo, hi = int(flat.node_offsets[node_id]), int(flat.node_offsets[node_id + 1])
    n_dec = int(node.decision.sum())
    label = Text()
    if node.parent > 0 and len(tree.nodes[node.parent].children) == 1:
        label.append("↳ ", style="dim")  # continues the line above (same conversation)
    label.append(f"#{node.id} ", style="bold")
    label.append(f"[{node.start_pos}:{node.end_pos}] {len(node)} tok", style="cyan")
    if n_dec:
        label.append(f" ({n_dec} sampled)", style="green")
    if node.branch_reason:
        label.append(f" ⑂ {node.branch_reason}", style="bold yellow" if node.branch_reason == "branch" else "magenta")
    if node_value is not None and not np.isnan(node_value[node_id]):
        label.append(f"  V={node_value[node_id]:.3f}", style="yellow")
    if adv_mean is not None and n_dec:
        a = float(np.nanmean(adv_mean[lo:hi][node.decision])) if n_dec else float("nan")
        label.append(f"  A={a:+.3f}", style="green" if a >= 0 else "red")
    label.append(f"  rollouts={','.join(node.rollouts)}", style="dim")
    label.append("\n")
    label.append(_span_text(node, decode, width))
    return label


def _span_text(node: Node, decode: Decode, width: int) -> Text:
    """Preview of the span: context dim, sampled text green (split at provenance changes)."""
    out = Text()
    if not len(node):
        return out
    change = np.flatnonzero(np.diff(node.decision.astype(np.int8))) + 1
    bounds = [0, *change.tolist(), len(node)]
    budget = max(20, width // max(1, len(bounds) - 1))
    for a, b in pairwise(bounds):
        text = preview(decode(node.tokens[a:b].tolist()), budget)
        out.append(text, style="green" if node.decision[a] else "dim")
        out.append(" ")
    return out


def render_tree(tree: PrefixTree, decode: Decode = ids_decode, adv: ShownAdvantages | None = None, width: int = 100,
                max_nodes: int = 400) -> RichGroup:
    """A rich renderable: the tree (up to ``max_nodes`` nodes) and the rollout table."""
    adv_mean = adv.adv_mean if adv is not None else None
    node_value = adv.node_value if adv is not None else None
    s = tree.stats
    title = Text.from_markup(
        f"[bold]group {escape(tree.group_id)}[/bold] task {escape(tree.task_id)} · {len(tree.rollouts)} rollouts · "
        f"{s.unique_tokens} unique tok ({s.decision_tokens} sampled) · per-call {s.per_call_tokens} · "
        f"per-rollout {s.per_rollout_tokens} · branches {s.branches}")
    root = Tree(title)
    # a chain of single children (one conversation's turns) is listed under its first node, each
    # marked ↳; only real branch points nest deeper
    containers = {0: root}
    for shown, node in enumerate(tree.nodes[1:]):
        if shown >= max_nodes:
            root.add(Text(f"… {len(tree.nodes) - 1 - shown} more nodes", style="dim"))
            break
        where = containers[node.parent]
        handle = where.add(node_label(tree, node.id, decode, width, adv_mean, node_value))
        head = len(tree.nodes[node.parent].children) > 1 or node.parent == 0
        containers[node.id] = handle if (len(node.children) > 1 or head) else where
    return RichGroup(root, rollout_table(tree, adv))


def branch_of(info: RolloutInfo) -> str:
    """`parent @ call j` for a replayed branch (rollout/branching.py), else ""."""
    return f"{info.parent} @ call {info.branch_call}" if info.parent else ""


def call_classes(info: RolloutInfo) -> str:
    """`main 4, side 2, ...`: the rollout's served calls per class (store/call_classes.py)."""
    return ", ".join(f"{k} {n}" for k, n in info.call_classes.items())


def rollout_advantages(tree: PrefixTree, adv: ShownAdvantages | None) -> dict[str, float]:
    """Rollout id -> its advantage as the tree view's table shows it: the estimator's own per-rollout
    value (grpo), else the mean of the per-token advantage (`adv_mean`) over the decision tokens the
    rollout sampled (tree_grpo: exact, one advantage per node; ppo: per-path values averaged)."""
    if adv is None:
        return {}
    if adv.rollout_adv:
        return {r: float(a) for r, a in adv.rollout_adv.items()}
    if adv.adv_mean is None:
        return {}
    flat = tree.flat()
    sums: dict[str, list[float]] = {}
    for node in tree.nodes:
        if not node.decision.any():
            continue
        values = np.asarray(adv.adv_mean)[flat.node_offsets[node.id] + np.flatnonzero(node.decision)]
        values = values[np.isfinite(values)]
        if not len(values):
            continue
        for r in node.decision_rollouts:
            acc = sums.setdefault(r, [0.0, 0.0])
            acc[0] += float(values.sum())
            acc[1] += len(values)
    return {r: total / n for r, (total, n) in sums.items() if n}


def rollout_table(tree: PrefixTree, adv: ShownAdvantages | None = None) -> Table:
    table = Table(title="rollouts", show_lines=False)
    for col in ("rollout", "harness", "status", "reward", "trains", "calls", "call classes", "paths", "advantage",
                "branch of"):
        table.add_column(col)
    advantages = rollout_advantages(tree, adv)
    for info in tree.rollouts.values():
        reward = "-" if info.reward is None else f"{info.reward:.3f}"
        trains = "yes" if info.kept else f"no ({info.filter_reason})"
        a = f"{advantages[info.rollout_id]:+.3f}" if info.kept and info.rollout_id in advantages else "-"
        table.add_row(info.rollout_id, info.harness, info.status, reward, trains, str(info.n_calls),
                      call_classes(info), str(len(info.paths)), a, branch_of(info),
                      style=None if info.kept else "dim")
    return table
