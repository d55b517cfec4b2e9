"""Synced updates on engine samples, and the trainer/engine mismatch after each (train = serve).

`synced_updates(engine, trainer, prompts, steps)` runs the loop a run runs, without harnesses: the
engine samples completions of fixed prompts, the trainer updates on them (`Trainer.update`, GRPO
advantages of a scripted reward), the weights are synced into the engine, and so on. Each round
records the update's `mismatch_kl`: KL(engine || trainer) on the tokens the engine has just sampled
with the weights of the previous sync, as the trainer scores them before its step (what a run
warns on, `algorithm.mismatch_kl_warn`), with the update's wall and CPU seconds and its token counts.
The model-tier test (tests/engine/test_real_vllm_bf16.py) and benchmarks/bench_update_precision.py
compare an fp32 trainer with bf16 compute through it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from harnessrl.engine.base import Engine, Generation, SamplingParams
from harnessrl.engine.knobs import DEFAULT_TEMPERATURE
from harnessrl.train.batch import TrainBatch
from harnessrl.train.packing import forest_from_paths

if TYPE_CHECKING:
    from harnessrl.train.protocol import TrainerBackend


def even_token_reward(tokens: Sequence[int]) -> float:
    """A scripted reward with contrast inside every group: the fraction of even token ids."""
    return float(np.mean([t % 2 == 0 for t in tokens])) if tokens else 0.0


def sampled_batch(prompts: Sequence[Sequence[int]], gens: Sequence[Generation], group: int,
                  temperature: float, reward: Callable[[Sequence[int]], float] = even_token_reward) -> TrainBatch:
    """A TrainBatch of `group` completions per prompt (gens in prompt order): one forest over every
    prompt + completion (a prompt's completions share it), the engine's logprobs on the sampled
    tokens, GRPO advantages (reward minus the group mean, over the group's std) with weight 1 a path."""
    seqs = [list(prompts[i // group]) + list(g.token_ids) for i, g in enumerate(gens)]
    forest, idx = forest_from_paths(seqs)
    n = len(forest)
    decision = np.zeros(n, bool)
    engine_logp, a_pos, a_neg, w = (np.zeros(n, np.float32) for _ in range(4))
    rewards = np.asarray([reward(g.token_ids) for g in gens], dtype=np.float64)
    for start in range(0, len(gens), group):
        r = rewards[start:start + group]
        adv = (r - r.mean()) / (r.std() + 1e-6)
        for k, a in enumerate(adv):
            g = gens[start + k]
            sampled = idx[start + k][len(prompts[start // group]):]
            decision[sampled] = True
            engine_logp[sampled] = np.asarray(g.logprobs, dtype=np.float32)
            w[sampled] += 1.0
            (a_pos if a > 0 else a_neg)[sampled] += a
    return TrainBatch(forest=forest, decision=decision, temperature=np.full(n, temperature, np.float32),
                      engine_logp=engine_logp, adv_pos=a_pos * decision, adv_neg=a_neg * decision,
                      weight=w * decision, tree_offsets=np.array([0, n]),
                      path_tokens=sum(len(s) for s in seqs))


@dataclass
class DriftRow:
    """One round: sample, update, sync."""

    step: int  # updates synced into the engine before this round's sampling
    mismatch_kl: float  # KL(engine || trainer) on this round's sampled tokens
    abs_logp_gap: float
    sampled_tokens: int
    unique_tokens: int  # the batch forest's tokens (every shared token once)
    update_wall_s: float
    update_cpu_s: float  # this process's CPU seconds during the update
    sample_wall_s: float
    sync_wall_s: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


async def _sample(engine: Engine, prompts: Sequence[Sequence[int]], group: int, params: SamplingParams, seed: int) -> list[Generation]:
    jobs = [engine.generate(list(p), replace(params, seed=seed + i))
            for i, p in enumerate(p for p in prompts for _ in range(group))]
    return list(await asyncio.gather(*jobs))


def synced_updates(engine: Engine, trainer: TrainerBackend, prompts: Sequence[Sequence[int]], steps: int, *, group: int = 4,
                   temperature: float = DEFAULT_TEMPERATURE, max_tokens: int = 32, seed: int = 0,
                   first_version: int = 1) -> list[DriftRow]:
    """`steps` + 1 rounds (the last one measures after `steps` synced updates): the trainer's
    weights are synced first, so the engine starts from them. Sampling seeds repeat per round, so
    two trainers from the same weights see the same first batch."""
    trainer.sync_weights(engine, first_version)
    params = SamplingParams(temperature=temperature, max_tokens=max_tokens)
    rows: list[DriftRow] = []
    for step in range(steps + 1):
        t0 = time.perf_counter()
        gens = [g for g in asyncio.run(_sample(engine, prompts, group, params, seed + 1000 * step))]
        t1 = time.perf_counter()
        batch = sampled_batch(prompts, gens, group, temperature)
        c0, u0 = time.process_time(), time.perf_counter()
        stats = trainer.update(batch)
        c1, u1 = time.process_time(), time.perf_counter()
        sync_s = 0.0
        if step < steps:
            trainer.sync_weights(engine, first_version + step + 1)
            sync_s = time.perf_counter() - u1
        rows.append(DriftRow(step=step, mismatch_kl=float(stats.mismatch_kl or 0.0),
                             abs_logp_gap=float(stats.abs_logp_gap or 0.0),
                             sampled_tokens=int(batch.n_decision), unique_tokens=len(batch),
                             update_wall_s=u1 - u0, update_cpu_s=c1 - c0, sample_wall_s=t1 - t0,
                             sync_wall_s=sync_s))
    return rows
