"""What training changed on the held-out sets, as a run's closing summary shows it: pass@1 before
(step 0) and after (the last eval step) per harness and set, and pooled over harnesses and sets,
each change with a paired 95% bootstrap interval over tasks (a task evaluated through two harnesses,
or in two sets, counts once per harness and set). The pooled row is what a short run such as
`make demo` can resolve: its per-harness cells are each too small to exclude 0 alone."""

from __future__ import annotations

from typing import Any

from harnessrl.report.transfer import Cell, Outcomes, before_after, cell, eval_set_names
from harnessrl.store.records import RolloutRecord


def held_out_changes(rollouts: list[RolloutRecord], config: dict[str, Any] | None) -> list[tuple[str, Cell]]:
    """[(label, cell)]: one per harness and set, then pooled per set over harnesses, per harness over
    sets and over everything (each pooled row only when it pools two or more cells); [] without an
    eval before and after training."""
    _, found = before_after(rollouts, config)
    rank = {n: i for i, n in enumerate(eval_set_names(config))}
    order = sorted(found, key=lambda k: (k[0], rank.get(k[1], len(rank)), k[1]))  # harness, then the config's set order
    pairs = {key: found[key] for key in order}
    out = [(f"{h} · {name}", c) for (h, name), (b, a) in pairs.items() if (c := cell(b, a)) is not None]
    harnesses = list(dict.fromkeys(h for h, _ in pairs))
    sets = list(dict.fromkeys(name for _, name in pairs))
    pools: list[tuple[str, list[tuple[str, str]]]] = []
    if len(harnesses) > 1:
        pools += [(f"all harnesses · {name}", [k for k in pairs if k[1] == name]) for name in sets]
    if len(sets) > 1:
        pools += [(f"{h} · all sets", [k for k in pairs if k[0] == h]) for h in harnesses]
    if len(harnesses) > 1 and len(sets) > 1:
        pools.append(("all harnesses · all sets", list(pairs)))
    for label, keys in pools:
        c = cell(*_pooled([pairs[k] for k in keys], keys))
        if c is not None and len(keys) > 1:
            out.append((label, c))
    return out


def _pooled(pairs: list[tuple[Outcomes, Outcomes]], keys: list[tuple[str, str]]) -> tuple[Outcomes, Outcomes]:
    before: Outcomes = {}
    after: Outcomes = {}
    for (b, a), (h, name) in zip(pairs, keys):
        before.update({f"{h}|{name}|{t}": v for t, v in b.items()})
        after.update({f"{h}|{name}|{t}": v for t, v in a.items()})
    return before, after


def headline_cells(changes: list[tuple[str, Cell]], config: dict[str, Any] | None) -> dict[str, Cell]:
    """harness -> its paired change on the headline set (the first eval set): the intervals the
    report's headline table prints next to each change."""
    names = eval_set_names(config)
    headline = names[0] if names else "test"
    out = {}
    for label, c in changes:
        harness, _, name = label.rpartition(" · ")
        if name == headline and harness != "all harnesses":
            out[harness] = c
    return out


def change_text(c: Cell) -> str:
    return f"{100 * c.change:+.1f} pts [{100 * c.ci95[0]:+.1f}, {100 * c.ci95[1]:+.1f}]"


def changes_markdown(changes: list[tuple[str, Cell]]) -> list[str]:
    """The report's section (empty without changes)."""
    if not changes:
        return []
    lines = ["## What training changed (held-out pass@1, paired 95% CI over tasks)", "",
             "An interval that excludes 0 is a change outside the noise of this eval's size.", "",
             "| harness · set | before | after | change [95% CI] | tasks | rollouts before / after |",
             "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {label} | {100 * c.before:.1f}% | {100 * c.after:.1f}% | {change_text(c)} | {c.tasks} | "
              f"{c.rollouts_before} / {c.rollouts_after} |" for label, c in changes]
    return lines + [""]
