"""Test doubles at the engine edge: a scripted engine that replies with given texts as token ids."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Iterable

from harnessrl.engine.base import EngineOverloaded, Generation, SamplingParams


class TextScriptEngine:
    """Replies with the next scripted text (tokenised, + the end-of-turn id); records what it saw."""

    def __init__(self, encode: Any, eot_id: int, replies: Iterable[str] = (), max_model_len: int = 8192,
                 version: int = 0):
        self._encode = encode
        self._eot_id = eot_id
        self.replies: deque[str] = deque(replies)
        self.max_model_len = max_model_len
        self.model_path = "smollm2-test"
        self._version = version
        self.seen: list[tuple[list[int], SamplingParams]] = []
        self.overloaded = False  # every call raises EngineOverloaded while set
        self.overload_next = 0  # the next n calls raise EngineOverloaded

    @property
    def policy_version(self) -> int:
        return self._version

    def set_version(self, version: int) -> None:
        self._version = version

    async def generate(self, prompt_ids: list[int], params: SamplingParams) -> Generation:
        if self.overloaded or self.overload_next > 0:
            self.overload_next = max(0, self.overload_next - 1)
            raise EngineOverloaded("busy")
        self.seen.append((list(prompt_ids), params))
        await asyncio.sleep(0)
        text = self.replies.popleft() if self.replies else "ok"
        ids = list(self._encode(text))
        finish = "stop"
        if len(ids) >= params.max_tokens:
            ids, finish = ids[: params.max_tokens], "length"
        else:
            ids.append(self._eot_id)
        return Generation(ids, [-0.25] * len(ids), finish, self._version, {"gen_s": 0.0})

    def update_weights(self, named_tensors: Any, version: int) -> None:
        self._version = version

    def close(self) -> None:
        pass
