"""In-process stand-ins for the rollout side: tasks with a token prompt, a collector that samples
straight from the engine (one call per rollout, no proxy/harness) and records into the store."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass

from harnessrl.engine import SamplingParams
from harnessrl.store.records import PROMPT, CallRecord, RolloutRecord


@dataclass(frozen=True)
class FakeTask:
    id: str
    prompt: tuple[int, ...]
    split: str = "train"

    def passed(self, reward):
        return reward is not None and reward >= 0.5


def fake_tasks(cfg):
    train = [FakeTask(f"t{i}", tuple(range(10 + i, 30 + i))) for i in range(6)]
    test = [FakeTask(f"e{i}", tuple(range(50 + i, 70 + i)), "test") for i in range(3)]
    return train, test


def fake_task_sets(cfg):
    """Two eval sets, as `tasks.eval_sets=[test, unseen]` gives."""
    train, test = fake_tasks(cfg)
    return train, {"test": test, "unseen": [FakeTask(f"u{i}", tuple(range(80 + i, 95 + i)), "unseen") for i in range(2)]}


def reward_of(ids: list[int]) -> float:
    """1 when the first sampled token has an even id (a policy can learn it per task prompt)."""
    return float(bool(ids) and ids[0] % 2 == 0)


class EngineCollector:
    def __init__(self, engine, store, temperature: float = 1.0, max_tokens: int = 8, delay_s: float = 0.0,
                 reward=reward_of):
        self.engine, self.store = engine, store
        self.temperature, self.max_tokens, self.delay_s = temperature, max_tokens, delay_s
        self.reward = reward

    def run(self, plans, progress=None):
        asyncio.run(self._run(plans, progress))

    async def _one(self, plan, idx, progress):
        rid = f"{plan.group_id}-{idx}-{uuid.uuid4().hex[:6]}"
        prompt = list(plan.task.prompt)
        t0 = time.time()
        gen = await self.engine.generate(prompt, SamplingParams(temperature=self.temperature,
                                                                max_tokens=self.max_tokens))
        self.store.insert_call(CallRecord(
            call_id=f"{rid}-c0", rollout_id=rid, seq=0, protocol="openai.chat", prompt_ids=prompt,
            sampled_ids=list(gen.token_ids), logprobs=list(gen.logprobs), prompt_provenance=[PROMPT] * len(prompt),
            policy_version=gen.policy_version, temperature=self.temperature, top_p=1.0,
            finish_reason=gen.finish_reason, t_start=t0, t_end=time.time()))
        self.store.put_rollout(RolloutRecord(
            rollout_id=rid, task_id=plan.task.id, harness=plan.harness, group_id=plan.group_id, status="ok",
            reward=self.reward(gen.token_ids), step=plan.step, sample_idx=idx, split=plan.split, call_count=1))
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if progress:
            progress(1, plan.harness, "ok")

    async def _run(self, plans, progress):
        await asyncio.gather(*(self._one(p, i, progress) for p in plans for i in range(p.n)))

    def close(self):
        pass


def fake_collector_factory(delay_s: float = 0.0, reward=reward_of):
    def make(cfg, engine, store, run_dir):
        return EngineCollector(engine, store, 1.0, cfg.serve.max_tokens, delay_s, reward)
    return make
