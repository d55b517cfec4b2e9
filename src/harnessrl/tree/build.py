"""Build the prefix tree of one group from its recorded calls.

Each call adds the sequence ``prompt_ids + sampled_ids`` to a compressed token trie. The walk
compares whole spans with numpy (first mismatch of two int32 arrays), so a call costs a handful of
vector compares plus at most one split, independent of how many tokens it shares.

- A call whose prompt extends an earlier call's sequence continues its path (multi-turn).
- A call that diverges from existing paths opens a branch; the reason is recorded:
  ``retry`` (same rollout, diverges inside its own completion: the harness re-sent the prompt),
  ``parallel`` (same rollout, the call started before an earlier call of it ended),
  ``restart`` (same rollout, diverges inside the history and resends none of the policy's earlier
  output after that point, by recorded provenance: a sub-agent, a compaction into a summary, a
  harness dropping a reply it could not parse, as mini-swe-agent does on a format error),
  ``rewrite`` (same rollout, diverges inside the history and then resends earlier policy output:
  history edited in place, e.g. dropped thinking or a harness-internal tail that is not resent), ``group_sample`` (another rollout sampled a
  different token here) and ``group_context`` (other rollouts saw different context here:
  different tool output, harness, or system prompt), and ``branch`` (a replayed branch sampled
  something else than a rollout it branched from, directly or through earlier branches: a branch
  point, rollout/branching.py).
- Exact duplicates (same rollout, same prompt and completion) are merged and counted once, unless
  the later one trains and the earlier did not (the same tokens cut by max_tokens first, then
  complete): then its decisions are marked on the shared path, so the complete sample still trains.
- Sampled tokens of kept, trainable calls are decision tokens; a span sampled in one call and
  resent as context in a later call keeps its decision flag, logprobs and policy version (the
  first sampling call wins where two calls sampled the same token at the same tree position).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from harnessrl.store.call_classes import class_counts
from harnessrl.store.records import CallRecord, RolloutRecord
from harnessrl.tree.filters import FilterConfig, plan_filters
from harnessrl.tree.nodes import Node, Path, PrefixTree, RolloutInfo
from harnessrl.tree.stats import TreeStats


class _CallArrays:
    """One call's sequence; per-token arrays are made only for the spans that need them."""

    __slots__ = ("_prov", "first_decision", "logprobs", "n_prompt", "seq", "temperature", "version", "weight")

    def __init__(self, call: CallRecord, prompt: np.ndarray, sampled: np.ndarray, trainable: bool,
                 weight: float = 1.0):
        n_p, n = len(prompt), len(prompt) + len(sampled)
        self.n_prompt = n_p
        self.seq = np.concatenate([prompt, sampled])
        # decisions are seq[first_decision:]; a first token with no context is scored by nothing
        self.first_decision = max(n_p, 1) if trainable and n > n_p else n
        logprobs = np.asarray(call.logprobs, dtype=np.float32) if trainable else None
        if logprobs is not None and len(logprobs) != n - n_p:
            raise ValueError(f"call {call.call_id}: {len(logprobs)} logprobs for {n - n_p} sampled ids "
                             "(corrupt record)")
        self.logprobs = logprobs
        self.temperature = float(call.temperature)
        self.weight = float(weight)  # loss weight of its decisions (a side call's filters.side_call_weight)
        self.version = int(call.policy_version)
        self._prov = call.prompt_provenance if len(call.prompt_provenance) == n_p else None

    def span(self, lo: int, hi: int) -> dict[str, np.ndarray]:
        """decision / logprobs / temperature / version arrays of seq[lo:hi]."""
        n = hi - lo
        dec = np.zeros(n, dtype=bool)
        lp = np.full(n, np.nan, dtype=np.float32)
        temp = np.ones(n, dtype=np.float32)
        ver = np.full(n, -1, dtype=np.int32)
        wt = np.ones(n, dtype=np.float32)
        d0 = max(self.first_decision, lo)
        if d0 < hi:  # only a trainable call has decisions, and so logprobs
            assert self.logprobs is not None
            k = d0 - lo
            dec[k:] = True
            lp[k:] = self.logprobs[d0 - self.n_prompt:hi - self.n_prompt]
            temp[k:] = self.temperature
            wt[k:] = self.weight
            ver[k:] = self.version
        return {"decision": dec, "logprobs": lp, "temperature": temp, "version": ver, "weight": wt}

    def provenance_from(self, pos: int) -> np.ndarray:
        """Recorded provenance of seq[pos:] (converted lazily: only branch tails need it)."""
        out = np.full(len(self.seq) - pos, self.version, dtype=np.int32)
        n_ctx = max(0, self.n_prompt - pos)
        out[:n_ctx] = -1 if self._prov is None else np.asarray(self._prov[pos:self.n_prompt], dtype=np.int32)
        return out


class _Trie:
    """Mutable compressed trie; ``freeze`` renumbers it in DFS order into Nodes."""

    def __init__(self) -> None:
        empty_i = np.zeros(0, dtype=np.int32)
        self.arr: list[dict[str, np.ndarray]] = [{
            "tokens": empty_i, "decision": np.zeros(0, bool), "logprobs": np.zeros(0, np.float32),
            "temperature": np.zeros(0, np.float32), "version": empty_i, "provenance": empty_i,
            "weight": np.zeros(0, np.float32)}]
        self.parent: list[int] = [-1]
        self.children: list[dict[int, int]] = [{}]
        self.start: list[int] = [0]
        self.rollouts: list[set[str]] = [set()]
        self.owners: list[set[str]] = [set()]  # rollouts whose trainable calls sampled this span
        self.call_ends: list[list[str]] = [[]]
        self.reason: list[str] = [""]
        self.reasons: Counter = Counter()

    def _new(self, parent: int, arrays: dict[str, np.ndarray], start: int, reason: str) -> int:
        nid = len(self.parent)
        self.arr.append(arrays)
        self.parent.append(parent)
        self.children.append({})
        self.start.append(start)
        self.rollouts.append(set())
        self.owners.append(set())
        self.call_ends.append([])
        self.reason.append(reason)
        if parent >= 0:
            self.children[parent][int(arrays["tokens"][0])] = nid
        return nid

    def _split(self, n: int, j: int) -> None:
        """Cut node n after j tokens; the tail becomes its only child and takes its children."""
        head = {k: v[:j] for k, v in self.arr[n].items()}
        tail = {k: v[j:] for k, v in self.arr[n].items()}
        m = len(self.parent)
        self.arr.append(tail)
        self.parent.append(n)
        self.children.append(self.children[n])
        for c in self.children[m].values():
            self.parent[c] = m
        self.start.append(self.start[n] + j)
        self.rollouts.append(set(self.rollouts[n]))
        self.owners.append(set(self.owners[n]))
        self.call_ends.append(self.call_ends[n])
        self.reason.append("")
        self.arr[n] = head
        self.children[n] = {int(tail["tokens"][0]): m}
        self.call_ends[n] = []

    def _mark(self, n: int, ca: _CallArrays, pos: int, rollout_id: str) -> None:
        """Copy the call's decision tokens onto node n (which covers seq[pos:pos+len]) where unset.

        Nodes are cut at every call's first decision position, so a node is either wholly inside
        the call's completion or not at all."""
        a = self.arr[n]
        if pos < ca.first_decision:
            return
        self.owners[n].add(rollout_id)
        lo, hi = pos, pos + len(a["tokens"])
        sl = slice(lo - pos, hi - pos)
        unset = ~a["decision"][sl]
        if not unset.any():
            return
        src = ca.span(lo, hi)
        for key in ("decision", "logprobs", "temperature", "version", "weight"):
            a[key][sl][unset] = src[key][unset]

    def insert(self, ca: _CallArrays, call: CallRecord, parallel: bool,
               ancestors: frozenset[str] = frozenset()) -> None:
        seq, length = ca.seq, len(ca.seq)
        node, pos = 0, 0
        while pos < length:
            self.rollouts[node].add(call.rollout_id)
            child = self.children[node].get(int(seq[pos]))
            if child is None:
                self._branch(node, ca, call, pos, parallel, ancestors)
                return
            ct = self.arr[child]["tokens"]
            m = min(len(ct), length - pos)
            diff = ct[:m] != seq[pos:pos + m]
            matched = int(diff.argmax()) if diff.any() else m
            cut = ca.first_decision
            j = cut - pos if pos < cut < pos + matched else matched  # stop at the completion start
            if j < len(ct):
                self._split(child, j)
            self._mark(child, ca, pos, call.rollout_id)
            node, pos = child, pos + j
            if j < matched:
                continue
            if j < m:  # mismatch inside the span: branch below the head
                self.rollouts[node].add(call.rollout_id)
                self._branch(node, ca, call, pos, parallel, ancestors)
                return
        self.rollouts[node].add(call.rollout_id)
        self.call_ends[node].append(call.call_id)

    def _branch(self, node: int, ca: _CallArrays, call: CallRecord, pos: int, parallel: bool,
                ancestors: frozenset[str]) -> None:
        siblings = list(self.children[node].values())
        reason = ""
        if siblings:
            reason = _branch_reason(self, siblings, ca, call.rollout_id, pos, parallel)
            if reason == "group_sample" and any(self.rollouts[s] & ancestors for s in siblings):
                reason = "branch"
            self.reasons[reason] += 1
        end = len(ca.seq)
        cut = ca.first_decision if pos < ca.first_decision < end else end
        for lo, hi in ((pos, cut), (cut, end)):  # context part, then the completion (own node)
            if lo >= hi:
                continue
            prov = ca.provenance_from(lo)[:hi - lo]
            node = self._new(node, {"tokens": ca.seq[lo:hi], **ca.span(lo, hi), "provenance": prov}, lo, reason)
            reason = ""
            self.rollouts[node].add(call.rollout_id)
            if lo >= ca.first_decision:
                self.owners[node].add(call.rollout_id)
        self.call_ends[node].append(call.call_id)


def _branch_reason(trie: _Trie, siblings: list[int], ca: _CallArrays, rollout_id: str, pos: int,
                   parallel: bool) -> str:
    if any(rollout_id in trie.rollouts[s] for s in siblings):
        if pos >= ca.n_prompt:
            return "retry"
        if parallel:
            return "parallel"
        carries_history = bool((ca.provenance_from(pos)[:max(0, ca.n_prompt - pos)] >= 0).any())
        return "rewrite" if carries_history else "restart"
    if pos >= ca.n_prompt or any(bool(trie.arr[s]["decision"][0]) for s in siblings):
        return "group_sample"
    return "group_context"


def build_tree(calls: Sequence[CallRecord], rollouts: Sequence[RolloutRecord],
               filters: FilterConfig | None = None) -> PrefixTree:
    """The prefix tree of one group: all calls of ``rollouts`` (one task, any harnesses).

    Calls are inserted per rollout in ``rollouts`` order, by ``seq``. Calls of rollouts not listed
    are ignored (counted as ``orphan_calls``).
    """
    cfg = filters or FilterConfig()
    plan = plan_filters(calls, rollouts, cfg)
    trie = _Trie()
    seen: dict[tuple[str, bytes], bool] = {}  # (rollout, digest of prompt + completion) -> inserted trainable
    merged = 0
    per_call = 0
    last_end: dict[str, float] = {}
    n_calls: Counter[str] = Counter()
    ancestors = _ancestors(rollouts)
    for call in plan.calls:
        rid = call.rollout_id
        key = (rid, plan.keys[call.call_id])
        trainable = plan.trainable[call.call_id]
        duplicate = key in seen
        if duplicate and (seen[key] or not trainable):
            merged += 1
            continue
        seen[key] = trainable
        if duplicate:  # inserted only to mark its decisions: still one call
            merged += 1
        else:
            n_calls[rid] += 1
        ca = _CallArrays(call, *plan.ids[call.call_id], trainable, plan.weights.get(call.call_id, 1.0))
        parallel = call.t_end > 0 and call.t_start < last_end.get(rid, 0.0)  # no times recorded: not parallel
        trie.insert(ca, call, parallel, ancestors.get(rid, frozenset()))
        last_end[rid] = max(last_end.get(rid, 0.0), call.t_end)
        if not plan.rollout_reason[rid] and not duplicate:
            per_call += len(ca.seq)
    nodes = _freeze(trie, prune=cfg.prune)
    paths, path_ids = _paths(nodes, [r.rollout_id for r in rollouts])
    infos = {
        r.rollout_id: RolloutInfo(
            rollout_id=r.rollout_id, harness=r.harness, status=r.status, reward=r.reward,
            kept=not plan.rollout_reason[r.rollout_id], filter_reason=plan.rollout_reason[r.rollout_id],
            n_calls=n_calls[r.rollout_id], paths=tuple(path_ids.get(r.rollout_id, ())),
            parent=r.lineage.parent if r.lineage else "", branch_call=r.lineage.branch_call if r.lineage else 0,
            call_classes=class_counts({c.call_id: plan.classes[c.call_id] for c in plan.calls
                                       if c.rollout_id == r.rollout_id and c.call_id in plan.classes}))
        for r in rollouts}
    kept = {rid for rid, info in infos.items() if info.kept}
    branch_reasons = trie.reasons  # every branch event, including those pruned away afterwards
    stats = TreeStats(
        trees=1, rollouts=len(rollouts), kept_rollouts=len(kept), calls=sum(n_calls.values()),
        nodes=len(nodes), paths=len(paths), unique_tokens=sum(len(n) for n in nodes),
        decision_tokens=int(sum(int(n.decision.sum()) for n in nodes)), per_call_tokens=per_call,
        per_rollout_tokens=sum(p.n_tokens for p in paths if p.rollout_id in kept),
        branches=sum(branch_reasons.values()), branch_reasons=dict(branch_reasons),
        merged_duplicates=merged, filtered=dict(plan.counts))
    group = rollouts[0].group_id if rollouts else ""
    task = rollouts[0].task_id if rollouts else ""
    return PrefixTree(group_id=group, task_id=task, nodes=nodes, paths=paths, rollouts=infos, stats=stats)


def _ancestors(rollouts: Sequence[RolloutRecord]) -> dict[str, frozenset[str]]:
    """Branch rollout -> the rollouts it descends from (its parent, the parent's parent, ...)."""
    parent = {r.rollout_id: r.lineage.parent for r in rollouts if r.lineage is not None}
    out = {}
    for rid in parent:
        seen: set[str] = set()
        cur = parent[rid]
        while cur and cur not in seen:
            seen.add(cur)
            cur = parent.get(cur, "")
        out[rid] = frozenset(seen)
    return out


def _freeze(trie: _Trie, prune: bool) -> list[Node]:
    """Renumber in DFS pre-order; with ``prune`` drop nodes with no decision token below them."""
    n_total = len(trie.parent)
    has_decision = np.array([bool(a["decision"].any()) for a in trie.arr])
    keep = np.ones(n_total, dtype=bool)
    if prune:
        below = has_decision.copy()
        for n in _post_order(trie):
            for c in trie.children[n].values():
                below[n] |= below[c]
        keep = below
        keep[0] = True
    nodes: list[Node] = []
    stack = [(0, -1, 0)]
    while stack:
        old, parent, depth = stack.pop()
        a = trie.arr[old]
        nid = len(nodes)
        nodes.append(Node(
            id=nid, parent=parent, tokens=a["tokens"], decision=a["decision"],
            engine_logprobs=a["logprobs"], temperature=a["temperature"], policy_version=a["version"],
            loss_weight=a["weight"],
            provenance=a["provenance"], start_pos=trie.start[old], depth=depth,
            rollouts=tuple(sorted(trie.rollouts[old])), decision_rollouts=tuple(sorted(trie.owners[old])),
            call_ends=tuple(trie.call_ends[old]),
            branch_reason=trie.reason[old]))
        if parent >= 0:
            nodes[parent].children.append(nid)
        kids = [c for c in trie.children[old].values() if keep[c]]
        for c in reversed(kids):
            stack.append((c, nid, depth + 1))
    for node in nodes:  # a branch whose siblings were all pruned is no longer a branch
        if node.branch_reason and len(nodes[node.parent].children) < 2:
            node.branch_reason = ""
    return nodes


def _post_order(trie: _Trie) -> list[int]:
    order, stack = [], [0]
    while stack:
        n = stack.pop()
        order.append(n)
        stack.extend(trie.children[n].values())
    return order[::-1]


def _paths(nodes: list[Node], rollout_ids: list[str]) -> tuple[list[Path], dict[str, list[int]]]:
    """One path per (rollout, node) where the rollout passes and none of the children has it."""
    paths: list[Path] = []
    by_rollout: dict[str, list[int]] = {}
    rank = {r: i for i, r in enumerate(rollout_ids)}
    ends: list[tuple[int, int, str]] = []
    for n in nodes[1:]:
        child_sets = [nodes[c].rollouts for c in n.children]
        for r in n.rollouts:
            if not any(r in s for s in child_sets):
                ends.append((rank.get(r, len(rank)), n.id, r))
    for _, nid, r in sorted(ends):
        chain = []
        cur = nid
        while cur >= 0:
            chain.append(cur)
            cur = nodes[cur].parent
        idx = len(paths)
        paths.append(Path(index=idx, rollout_id=r, nodes=tuple(reversed(chain)), n_tokens=nodes[nid].end_pos))
        by_rollout.setdefault(r, []).append(idx)
    return paths, by_rollout
