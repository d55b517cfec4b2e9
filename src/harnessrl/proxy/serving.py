"""Serving policy: which temperature, top_p and max_tokens a call samples with, and where a stop
string cuts a completion.

Each knob has a serving value and a mode (`serve.temperature_mode` ... in the run config,
`--temperature-mode` ... on the CLI):

- ``default``: the value the harness sends is used; the serving value only fills in when it
  sends none (Claude Code, Codex and OpenClaw send no temperature).
- ``force``: the serving value is used whatever the harness sends (aider sends temperature 0:
  every sample of a GRPO group is then the same, and the group carries no signal).

A call's store record keeps both: `temperature`/`top_p` (and `meta.sampling.max_tokens`) are the
values used, `meta.sampling.sent` what the harness sent and `meta.sampling.forced` the knobs whose
sent value was overridden. `max_tokens_cap` bounds max_tokens in both modes (a run's serve.max_tokens).

`ServingPolicy` holds these values, each with its one default and its one bound: a RunConfig builds
it (`RunConfig.serve.policy()`), `harnessrl serve` builds it from its flags, and the proxy server and
its call handler take it unchanged (white-box calls the proxy's call method). Its `model_dump()` is what the store's
"serve" meta and `GET /admin/info`'s "serving" hold.

Stop strings: a completion ends at the first occurrence of any stop string in its decoded text,
whatever the number of tokens the string spans. The trained ids end with the token that completed
the match (so they are exactly what the engine sampled up to there; logprobs are cut alongside),
the returned text ends before the stop string (the OpenAI rule), and finish_reason is "stop". The
cut is made on the engine's output, so every engine (hf, vllm, scripted) agrees by construction;
a stop string that is one token is also handed to the engine as a stop id, so it stops early.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

from harnessrl.engine.base import SamplingParams
from harnessrl.engine.checks import fit_max_tokens
from harnessrl.engine.knobs import (DEFAULT_MAX_TOKENS, DEFAULT_TEMPERATURE, DEFAULT_TOP_P, Asked, MaxTokens, Temperature,
                                   TopP)

KNOBS = ("temperature", "top_p", "max_tokens")
MODES = ("default", "force")
Knob = Literal["temperature", "top_p", "max_tokens"]
# The defaults and bounds of the serving values are engine/knobs.py's (written once; RunConfig's
# serve.* use them too). 0 is greedy (engine/base.py: its logprobs are taken under T = 1).
__all__ = ["KNOBS", "MODES", "MaxTokens", "Sampled", "ServingPolicy", "Temperature", "TopP", "check_forced",
           "resolve", "sampling_params", "stop_cut"]


@dataclass(frozen=True)
class Sampled:
    """The values one call samples with, what the harness sent, and which were overridden."""

    temperature: float
    top_p: float
    max_tokens: int
    sent: dict[str, float | int | None]
    forced: tuple[str, ...]


class ServingPolicy(BaseModel):
    """How a proxy serves: the values a call samples with when the harness sends none, the cap on
    one reply, and the knobs whose serving value replaces what the harness sends. Frozen: built once
    (RunConfig.serve.policy(), or `harnessrl serve`'s flags) and passed unchanged."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    default_temperature: Temperature = DEFAULT_TEMPERATURE  # Claude Code, Codex and OpenClaw send no temperature
    default_top_p: TopP = DEFAULT_TOP_P
    max_tokens: MaxTokens = DEFAULT_MAX_TOKENS  # a run's serve.max_tokens
    # a limit on one reply, whatever the harness asks (Claude Code asks 32000): a run's per-call
    # budget; the cut reply ends with finish_reason "length". None: bounded by the context only
    max_tokens_cap: MaxTokens | None = None
    force: tuple[Knob, ...] = ()

    @field_validator("force", mode="before")
    @classmethod
    def _known_knobs(cls, v: Collection[str]) -> tuple[str, ...]:
        return check_forced(v)

    def resolve(self, asked: Asked) -> Sampled:
        """The values a call that sent `asked` samples with (None: the harness sent none)."""
        sent: dict[str, float | int | None] = {"temperature": asked.temperature, "top_p": asked.top_p,
                                              "max_tokens": asked.max_tokens}
        serving: dict[str, float | int] = {"temperature": self.default_temperature, "top_p": self.default_top_p,
                                           "max_tokens": self.max_tokens}
        return resolve(sent, serving, self.force, self.max_tokens_cap)


DEFAULT_POLICY = ServingPolicy()  # frozen: the defaults (engine/knobs.py), no cap


def sampling_params(used: Sampled, n_prompt: int, max_model_len: int, stop_ids: Sequence[int],
                    route_key: str | None) -> SamplingParams:
    """What the engine is asked: the used values, max_tokens bounded by what the context leaves
    (engine/checks.py `fit_max_tokens`, the engines' own bound: PromptTooLong when not one token fits)."""
    return SamplingParams(temperature=used.temperature, top_p=used.top_p,
                          max_tokens=fit_max_tokens(n_prompt, used, max_model_len),
                          stop_token_ids=tuple(dict.fromkeys(stop_ids)), route_key=route_key)


def check_forced(force: Collection[str]) -> tuple[str, ...]:
    """The knobs to force, validated (ValueError names the known ones)."""
    bad = sorted(set(force) - set(KNOBS))
    if bad:
        raise ValueError(f"cannot force {', '.join(bad)}: the serving knobs are {', '.join(KNOBS)}")
    return tuple(k for k in KNOBS if k in force)


def resolve(sent: dict[str, float | int | None], serving: dict[str, float | int], force: Collection[str],
            max_tokens_cap: int | None) -> Sampled:
    """The used value of each knob: the sent one unless it is None or the knob is forced."""
    used: dict[str, float | int] = {}
    forced: list[str] = []
    for knob in KNOBS:
        value = sent.get(knob)
        if value is None or knob in force:
            if value is not None and value != serving[knob]:
                forced.append(knob)
            value = serving[knob]
        used[knob] = value
    max_tokens = int(used["max_tokens"])
    if max_tokens_cap is not None:
        max_tokens = min(max_tokens, max_tokens_cap)
    return Sampled(float(used["temperature"]), float(used["top_p"]), max_tokens, dict(sent), tuple(forced))


def stop_cut(ids: Sequence[int], stops: Sequence[str], decode: Callable[[list[int]], str]) -> int | None:
    """How many of `ids` to keep so that they end with the token that completes the first stop
    string in their decoded text; None when no stop string occurs. A decoded prefix keeps every
    complete character of a longer one, so `any stop in decode(ids[:k])` is monotone in k and a
    binary search finds the first k (O(log n) decodes)."""
    stops = [s for s in stops if s]
    if not ids or not stops or not any(s in decode(list(ids)) for s in stops):
        return None
    lo, hi = 1, len(ids)  # decode(ids[:hi]) holds a stop; find the least such hi
    while lo < hi:
        mid = (lo + hi) // 2
        if any(s in decode(list(ids[:mid])) for s in stops):
            hi = mid
        else:
            lo = mid + 1
    return hi

