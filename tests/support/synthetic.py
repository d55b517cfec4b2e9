"""Synthetic call records for tests and benchmarks (pure numpy; no engine needed).

``claude_code_group`` shapes a group like Claude Code traffic: a long shared prefix (system prompt,
tools, task), then per rollout a linear multi-turn conversation whose every request resends the
whole history plus the newest tool result.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from harnessrl.store.records import PROMPT, CallRecord, RolloutRecord


def make_call(rollout_id: str, seq: int, prompt: Sequence[int], sampled: Sequence[int], *,
              logprobs: Sequence[float] | None = None, version: int = 0, temperature: float = 1.0,
              finish: str = "stop", t_start: float = 0.0, t_end: float = 0.0,
              provenance: Sequence[int] | None = None, call_id: str | None = None,
              status: str = "ok") -> CallRecord:
    prompt = [int(x) for x in prompt]
    sampled = [int(x) for x in sampled]
    if logprobs is None:
        logprobs = [-0.01 * (1 + (i % 7)) for i in range(len(sampled))]
    return CallRecord(
        call_id=call_id or f"{rollout_id}:{seq}", rollout_id=rollout_id, seq=seq, protocol="synthetic",
        prompt_ids=prompt, sampled_ids=sampled, logprobs=[float(x) for x in logprobs],
        prompt_provenance=list(provenance) if provenance is not None else [PROMPT] * len(prompt),
        policy_version=version, temperature=temperature, top_p=1.0, finish_reason=finish, status=status,
        t_start=t_start, t_end=t_end)


def make_rollout(rollout_id: str, reward: float | None, status: str = "ok", harness: str = "synthetic",
                 group_id: str = "g0", task_id: str = "task0") -> RolloutRecord:
    return RolloutRecord(rollout_id=rollout_id, task_id=task_id, harness=harness, group_id=group_id,
                         status=status, reward=reward if status == "ok" else None)


def conversation_calls(rollout_id: str, first_prompt: Sequence[int],
                       turns: Sequence[tuple[Sequence[int], Sequence[int]]], *, version: int = 0,
                       start_seq: int = 0, t0: float = 0.0) -> list[CallRecord]:
    """Linear multi-turn calls: turn k = (completion_k, observation_k); call k+1's prompt is
    call k's prompt + completion_k + observation_k (exact history reuse)."""
    calls, prompt, prov = [], list(first_prompt), [PROMPT] * len(first_prompt)
    for k, (completion, observation) in enumerate(turns):
        t = t0 + 2.0 * k
        calls.append(make_call(rollout_id, start_seq + k, prompt, completion, version=version,
                               provenance=prov, t_start=t, t_end=t + 1.0))
        prompt = prompt + list(completion) + list(observation)
        prov = prov + [version] * len(completion) + [PROMPT] * len(observation)
    return calls


def claude_code_group(n_rollouts: int = 8, prefix_tokens: int = 10_000, turns: int = 10,
                      completion_tokens: tuple[int, int] = (40, 400),
                      observation_tokens: tuple[int, int] = (50, 1500), vocab: int = 49_152,
                      seed: int = 0, group_id: str = "g0") -> tuple[list[CallRecord], list[RolloutRecord]]:
    """A GRPO group shaped like Claude Code: shared ~prefix_tokens prefix, then per rollout a linear
    conversation of ``turns`` calls with random completions and tool results; rewards in {0, 1}."""
    rng = np.random.default_rng(seed)
    prefix = rng.integers(0, vocab, prefix_tokens).tolist()
    calls: list[CallRecord] = []
    rollouts: list[RolloutRecord] = []
    for i in range(n_rollouts):
        rid = f"{group_id}-r{i}"
        conv = []
        for _ in range(turns):
            c = rng.integers(0, vocab, int(rng.integers(*completion_tokens))).tolist()
            o = rng.integers(0, vocab, int(rng.integers(*observation_tokens))).tolist()
            conv.append((c, o))
        calls.extend(conversation_calls(rid, prefix, conv))
        rollouts.append(make_rollout(rid, float(rng.integers(0, 2)), group_id=group_id))
    return calls, rollouts
