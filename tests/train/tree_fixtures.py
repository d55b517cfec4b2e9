"""Synthetic captured calls for one group (multi-turn, a compaction branch, shared system prompt)."""

from __future__ import annotations

import random

from harnessrl.store.records import PROMPT, CallRecord, RolloutRecord


def _call(rid: str, seq: int, prompt: list[int], sampled: list[int], rng: random.Random, temp: float) -> CallRecord:
    return CallRecord(
        call_id=f"{rid}-c{seq}", rollout_id=rid, seq=seq, protocol="openai.chat", prompt_ids=prompt,
        sampled_ids=sampled, logprobs=[-rng.uniform(0.5, 4.0) for _ in sampled],
        prompt_provenance=[PROMPT] * len(prompt), policy_version=0, temperature=temp, top_p=1.0,
        finish_reason="stop", t_start=float(seq), t_end=float(seq) + 0.5)


def group_calls(seed: int = 0, n: int = 4, vocab: int = 64, temp: float = 0.9):
    """n rollouts: 2-3 turns each sharing a system prompt; rollout 1 compacts its history."""
    rng = random.Random(seed)
    rand = lambda k: [rng.randrange(vocab) for _ in range(k)]  # noqa: E731
    system = rand(12)
    calls, rollouts = [], []
    for i in range(n):
        rid = f"r{i}"
        prompt = system + rand(3)
        seq = 0
        for turn in range(2 + i % 2):
            sampled = rand(rng.randint(3, 7))
            calls.append(_call(rid, seq, prompt, sampled, rng, temp))
            seq += 1
            prompt = prompt + sampled + rand(2)
            if i == 1 and turn == 0:  # compaction: history rewritten -> a branch
                prompt = system + rand(4)
        rollouts.append(RolloutRecord(rollout_id=rid, task_id="t0", harness="builtin", group_id="g0",
                                      status="ok", reward=float(i % 2), call_count=seq))
    return calls, rollouts
