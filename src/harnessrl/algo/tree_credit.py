"""On-policy credit on a branched prefix tree: the values, sample masses and segments `tree_grpo`
trains on (docs/training.md, "Tree credit").

Draws. Every kept, rewarded rollout is a draw from one node, its *origin*: a fresh group sample
from the root; a branch (rollout/branching.py) from its branch point, the node where its own
sampling starts (the lowest common ancestor of the parents of its decision nodes). A rollout is a
draw at node s when it passes s and its origin is s or above s; below its origin its continuation
is an on-policy sample of pi(. | s). Above its origin a branch is a replayed copy, never a draw. A
kept branch that sampled no trainable token has no origin and enters no estimate.

Points. X = the root and every branch origin. A node's *upper point* y(s) is the deepest point
strictly above it. The decision tokens of a draw with the same upper point form one *segment*.

Values (bottom-up). The continuation value of draw d below s is C_d(s) = the mean of H_d(c) over
the children c of s it passes (R_d where it passes none), with H_d(c) = V(c) when c is a point
(the pooled estimate) and C_d(c) otherwise. V(s) = mean of C_d(s) over the draws at s. Without
branches V(s) is the mean reward of the rollouts through s. With branches it is the estimate
that counts each draw once where it was drawn: a point's value pools every continuation drawn at
or above it equally, and that pooled value stands for the whole subtree in every estimate above
it. So V(root) is an empirical mean over a distribution q on the draws (q sums to 1), unbiased
for the policy's expected reward whenever a branch point is chosen from what the parent did up
to it (not from its outcome). The second moment S(s) is the same recursion on R^2, and the scale
is sigma = sqrt(S(root) - V(root)^2), the std of the rewards under q.

Masses (top-down over the points). Each fresh draw has mass 1 at the root. The draws that reach a
point x from its upper point y bring their mass (split evenly over the points below y a draw
reaches); the draws at x, those from above and the branches drawn there, share it equally. So a
branch costs a share of its parent's unit, never a unit of its own, and the masses of the draws
at every point sum to the mass that reached it. A point no draw from above reaches (a prefix
borrowed from an earlier step, or a kept branch whose parent was filtered) is a start of its own
with one unit, its own value and scale, and no weight in V(root).

Credit of a row (rollout r, decision node s), y = y(s):
    A = (H_r(s) - V(y)) / (sigma + eps)          weight: mass of r at y
H_r(s) is V of the first point at or below s on r's way down, or R_r where there is none. Along
a path the segment advantages telescope to (R - V(root)) / sigma, GRPO's advantage; without a
branch every row is exactly GRPO's. A branch's tokens are credited against their siblings at its
branch point only; the prefix above a point by the mean of all continuations through it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harnessrl.tree.nodes import PrefixTree


@dataclass(frozen=True)
class TreeCredit:
    origin: dict[str, int]  # draw -> the node it was drawn from
    upper: np.ndarray  # int64 [nodes]: deepest point strictly above each node (-1 for the root)
    is_point: np.ndarray  # bool [nodes]
    value: np.ndarray  # float64 [nodes]: V(s), nan where no draw passes
    second: np.ndarray  # float64 [nodes]: S(s), the same estimate of E[R^2]
    returns: dict[int, dict[str, float]]  # node -> draw -> H_d(node): what the node's tokens earn for d
    mass: dict[tuple[int, str], float]  # (point, draw) -> the draw's mass there
    start: dict[int, int]  # point -> the start whose unit it shares (the root, or an orphan point)
    at_root: dict[str, tuple[float, float]]  # root draw -> (C_d(root), its second moment)


def subtree_end(tree: PrefixTree) -> np.ndarray:
    """int64 [nodes]: node a is an ancestor-or-self of s iff a <= s < end[a] (DFS pre-order)."""
    end = np.arange(1, len(tree.nodes) + 1, dtype=np.int64)
    for node in reversed(tree.nodes):
        if node.parent >= 0:
            end[node.parent] = max(end[node.parent], end[node.id])
    return end


def draw_origins(tree: PrefixTree, draws: set[str], end: np.ndarray) -> dict[str, int]:
    """Draw -> origin node: 0 for a fresh rollout; for a branch the lowest common ancestor of the
    parents of its decision nodes; a branch with no decision node is left out."""
    own: dict[str, list[int]] = {}
    for node in tree.nodes:
        for r in node.decision_rollouts:
            own.setdefault(r, []).append(node.parent)
    out: dict[str, int] = {}
    for r in draws:
        if not tree.rollouts[r].parent:
            out[r] = 0
        elif r in own:
            a = own[r][0]
            for q in own[r][1:]:
                while not a <= q < end[a]:
                    a = tree.nodes[a].parent
            out[r] = max(a, 0)
    return out


def tree_credit(tree: PrefixTree, rewards: dict[str, float]) -> TreeCredit:
    """Values, returns, masses and starts of one group (module docstring); `rewards` holds the kept
    rollouts' (possibly normalised) rewards."""
    nodes = tree.nodes
    end = subtree_end(tree)
    origin = draw_origins(tree, set(rewards), end)
    is_point = np.zeros(len(nodes), dtype=bool)
    is_point[0] = True
    is_point[[o for o in origin.values()]] = True
    upper = np.full(len(nodes), -1, dtype=np.int64)
    for node in nodes[1:]:
        upper[node.id] = node.parent if is_point[node.parent] else upper[node.parent]
    value = np.full(len(nodes), np.nan)
    second = np.full(len(nodes), np.nan)
    at_root: dict[str, tuple[float, float]] = {}
    h1: dict[int, dict[str, float]] = {}
    h2: dict[int, dict[str, float]] = {}
    for node in reversed(nodes):  # children before parents
        s = node.id
        through = set(node.rollouts)
        if s == 0:  # a fresh rollout that left no call in the tree is still a draw at the root
            through |= {r for r, o in origin.items() if o == 0}
        c1: dict[str, float] = {}
        c2: dict[str, float] = {}
        for r in sorted(through):
            o = origin.get(r)
            if o is None or not o <= s < end[o]:
                continue
            below = [c for c in node.children if r in h1.get(c, {})]
            if below:
                c1[r] = float(np.mean([h1[c][r] for c in below]))
                c2[r] = float(np.mean([h2[c][r] for c in below]))
            else:
                c1[r], c2[r] = rewards[r], rewards[r] ** 2
        if s == 0:
            at_root = {r: (c1[r], c2[r]) for r in c1}
        if c1:
            value[s] = float(np.mean(list(c1.values())))
            second[s] = float(np.mean(list(c2.values())))
        h1[s] = {r: float(value[s]) for r in c1} if is_point[s] else c1
        h2[s] = {r: float(second[s]) for r in c2} if is_point[s] else c2
    mass, start = _masses(nodes, upper, is_point, origin, h1)
    return TreeCredit(origin, upper, is_point, value, second, h1, mass, start, at_root)


def _masses(nodes: list, upper: np.ndarray, is_point: np.ndarray, origin: dict[str, int],
            returns: dict[int, dict[str, float]]) -> tuple[dict[tuple[int, str], float], dict[int, int]]:
    """(point, draw) -> mass, and point -> start (module docstring, "Masses")."""
    points = [int(x) for x in np.flatnonzero(is_point)]  # DFS order: a point after its upper point
    draws_at = {x: sorted(returns.get(x, {})) for x in points}
    below: dict[tuple[int, str], int] = {}  # (upper point, draw) -> points below it that the draw reaches
    for x in points[1:]:
        for r in draws_at[x]:
            if origin[r] != x:
                below[(int(upper[x]), r)] = below.get((int(upper[x]), r), 0) + 1
    mass: dict[tuple[int, str], float] = {(0, r): 1.0 for r in draws_at[0]}
    start = {0: 0}
    for x in points[1:]:
        y = int(upper[x])
        arriving = sum(mass.get((y, r), 0.0) / below[(y, r)] for r in draws_at[x] if origin[r] != x)
        start[x] = start[y] if arriving > 0 else x
        share = (arriving if arriving > 0 else 1.0) / max(len(draws_at[x]), 1)
        mass.update({(x, r): share for r in draws_at[x]})
    return mass, start
