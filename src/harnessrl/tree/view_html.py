"""One self-contained HTML page per run view: collapsible trees (<details>), tokens coloured by
provenance (context grey, sampled tokens green/red by advantage), rollout rewards and statuses."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from itertools import pairwise

import numpy as np

from harnessrl.tree.nodes import PrefixTree
from harnessrl.tree.view_text import ShownAdvantages, branch_of, rollout_advantages

Decode = Callable[[Sequence[int]], str]

CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
h2{margin-top:2em} table{border-collapse:collapse;margin:.5em 0}
td,th{border:1px solid #ccc;padding:2px 8px;font-size:13px} tr.filtered{color:#999}
details{margin-left:1.2em;border-left:1px solid #ddd;padding-left:.5em}
summary{cursor:pointer;font-size:13px} .meta{color:#555} .reason{color:#a0a} .branchpoint{color:#b60;font-weight:bold}
.span{font-family:ui-monospace,monospace;font-size:12px;white-space:pre-wrap;margin:.2em 0 .4em 1.2em}
.ctx{color:#777;background:#f4f4f4} .ctxs{color:#557;background:#e6ecf8} .tok{border-radius:2px} .legend span{padding:0 6px;margin-right:6px}
"""

SCRIPT = """
function setAll(open){document.querySelectorAll('details').forEach(d=>d.open=open)}
"""


def adv_colour(a: float, scale: float) -> str:
    """Green for positive advantage, red for negative; opacity grows with |A| / scale."""
    if np.isnan(a):
        return "rgba(80,160,80,0.15)"
    alpha = 0.15 + 0.75 * min(1.0, abs(a) / scale) if scale > 0 else 0.15
    return f"rgba(40,160,60,{alpha:.2f})" if a >= 0 else f"rgba(210,50,50,{alpha:.2f})"


def _span_html(tree: PrefixTree, node_id: int, decode: Decode, adv_mean: np.ndarray | None,
               scale: float, max_tokens: int) -> str:
    node = tree.nodes[node_id]
    lo = int(tree.flat().node_offsets[node_id])
    parts = []
    # 2: decision, 1: context sampled by the policy in a call that does not train, 0: harness text
    kind = np.where(node.decision, 2, np.where(node.provenance >= 0, 1, 0))
    change = np.flatnonzero(np.diff(kind)) + 1
    bounds = [0, *change.tolist(), len(node)]
    for a, b in pairwise(bounds):
        if kind[a] < 2:  # context: one span, long ones elided in the middle
            ids = node.tokens[a:b].tolist()
            if len(ids) > max_tokens:
                half = max_tokens // 2
                text = decode(ids[:half]) + f"\n… {len(ids) - 2 * half} context tokens …\n" + decode(ids[-half:])
            else:
                text = decode(ids)
            what = "sampled by the policy, not trained" if kind[a] else "context"
            parts.append(f'<span class="{"ctxs" if kind[a] else "ctx"}" '
                         f'title="{what} [{node.start_pos + a}:{node.start_pos + b}]">{html.escape(text)}</span>')
            continue
        for j in range(a, min(b, a + max_tokens)):
            q = lo + j
            av = float(adv_mean[q]) if adv_mean is not None else float("nan")
            title = (f"id={int(node.tokens[j])} pos={node.start_pos + j} "
                     f"logp={float(node.engine_logprobs[j]):.3f} v={int(node.policy_version[j])} "
                     f"T={float(node.temperature[j]):.2f}" + ("" if np.isnan(av) else f" A={av:+.3f}"))
            parts.append(f'<span class="tok" style="background:{adv_colour(av, scale)}" title="{title}">'
                         f"{html.escape(decode([int(node.tokens[j])]))}</span>")
        if b - a > max_tokens:
            parts.append(f'<span class="ctx">… {b - a - max_tokens} more sampled tokens</span>')
    return "".join(parts)


def _node_summary(tree: PrefixTree, node_id: int, node_value: np.ndarray | None) -> str:
    node = tree.nodes[node_id]
    bits = [f"<b>#{node.id}</b> [{node.start_pos}:{node.end_pos}] {len(node)} tok"]
    n_dec = int(node.decision.sum())
    if n_dec:
        bits.append(f"{n_dec} sampled")
    if node.branch_reason:
        cls = "reason branchpoint" if node.branch_reason == "branch" else "reason"
        bits.append(f'<span class="{cls}">⑂ {html.escape(node.branch_reason)}</span>')
    if node_value is not None and not np.isnan(node_value[node_id]):
        bits.append(f"V={node_value[node_id]:.3f}")
    bits.append(f'<span class="meta">rollouts: {html.escape(", ".join(node.rollouts))}</span>')
    return " · ".join(bits)


def tree_html(tree: PrefixTree, decode: Decode, adv: ShownAdvantages | None = None, max_tokens: int = 400) -> str:
    """The HTML fragment of one tree: stats, rollout table and the collapsible node tree."""
    adv_mean = adv.adv_mean if adv is not None else None
    node_value = adv.node_value if adv is not None else None
    finite = adv_mean[np.isfinite(adv_mean)] if adv_mean is not None else np.zeros(0)
    scale = float(np.abs(finite).max()) if len(finite) else 1.0
    out = [f"<h2>group {html.escape(tree.group_id)} · task {html.escape(tree.task_id)}</h2>",
           _stats_html(tree), _rollouts_html(tree, adv)]

    for child in tree.root.children:
        _emit(tree, child, out, lambda n: _node_summary(tree, n, node_value),
              lambda n: _span_html(tree, n, decode, adv_mean, scale, max_tokens))
    return "\n".join(out)


def _emit(tree: PrefixTree, start: int, out: list[str], summary: Callable[[int], str],
          span: Callable[[int], str]) -> None:
    """Nested <details> per branch, without recursion (conversations can be thousands of nodes
    deep); a chain of single children (turns of one conversation) stays inside one block."""
    stack: list[tuple[int, str]] = [(start, "open")]
    while stack:
        node_id, kind = stack.pop()
        if kind == "close":
            out.append("</details>")
            continue
        if kind == "open":
            out.append(f"<details open><summary>{summary(node_id)}</summary>")
            stack.append((node_id, "close"))
        else:
            out.append(f'<div class="meta">↳ {summary(node_id)}</div>')
        out.append(f'<div class="span">{span(node_id)}</div>')
        children = tree.nodes[node_id].children
        if len(children) == 1:
            stack.append((children[0], "cont"))
        else:
            stack.extend((c, "open") for c in reversed(children))


def _stats_html(tree: PrefixTree) -> str:
    d = tree.stats.to_dict()
    keys = ("unique_tokens", "decision_tokens", "per_call_tokens", "per_rollout_tokens", "branches",
            "merged_duplicates", "call_sharing", "rollout_sharing")
    row = "".join(f"<td>{d[k]}</td>" for k in keys)
    extra = f"branch reasons: {html.escape(str(d['branch_reasons']))} · filtered: {html.escape(str(d['filtered']))}"
    return (f"<table><tr>{''.join(f'<th>{k}</th>' for k in keys)}</tr><tr>{row}</tr></table>"
            f'<div class="meta">{extra}</div>')


ADV_TITLE = ("grpo: the rollout's advantage; other estimators: the mean advantage over the rollout's sampled "
             "tokens (per token, the weighted mean of what trained it); - : the rollout trained no token")


def _rollouts_html(tree: PrefixTree, adv: ShownAdvantages | None = None) -> str:
    header = "".join(f"<th>{h}</th>" if h != "advantage" else f'<th title="{html.escape(ADV_TITLE)}">{h}</th>'
                     for h in ("rollout", "harness", "status", "reward", "trains", "calls", "paths", "advantage",
                               "branch of"))
    rows = [f"<table><tr>{header}</tr>"]
    advantages = rollout_advantages(tree, adv)
    for info in tree.rollouts.values():
        a = f"{advantages[info.rollout_id]:+.3f}" if info.kept and info.rollout_id in advantages else "-"
        reward = "-" if info.reward is None else f"{info.reward:.3f}"
        trains = "yes" if info.kept else f"no ({html.escape(info.filter_reason)})"
        cls = "" if info.kept else ' class="filtered"'
        rows.append(f"<tr{cls}><td>{html.escape(info.rollout_id)}</td><td>{html.escape(info.harness)}</td>"
                    f"<td>{html.escape(info.status)}</td><td>{reward}</td><td>{trains}</td>"
                    f"<td>{info.n_calls}</td><td>{len(info.paths)}</td><td>{a}</td>"
                    f"<td>{html.escape(branch_of(info))}</td></tr>")
    rows.append("</table>")
    return "".join(rows)


def page(trees_html: Sequence[str], title: str) -> str:
    """A complete self-contained page (inline CSS and JS, no external resources)."""
    legend = ('<div class="legend"><span class="ctx">context</span>'
              '<span class="ctxs">sampled, not trained (filtered)</span>'
              f'<span style="background:{adv_colour(1, 1)}">sampled, A &gt; 0</span>'
              f'<span style="background:{adv_colour(-1, 1)}">sampled, A &lt; 0</span>'
              '<button onclick="setAll(true)">expand all</button> '
              '<button onclick="setAll(false)">collapse all</button></div>')
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style><script>{SCRIPT}</script></head><body><h1>{html.escape(title)}</h1>"
            f"{legend}{''.join(trees_html)}</body></html>")
