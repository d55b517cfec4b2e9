"""The sampling knobs — temperature, top_p, max_tokens — each with one name, one default and one
check, written here once (torch-free) and read by every layer a value passes through:

| knob | default | a serving value (config, flags) | what a request / an engine call may ask |
|---|---|---|---|
| temperature | 1.0 (the API default) | `Temperature`: 0 <= T <= 2 | `knob_error`: T >= 0 (0 = greedy) |
| top_p | 1.0 | `TopP`: 0 < p <= 1 | `knob_error`: 0 < p <= 1 |
| max_tokens | 256 | `MaxTokens`: >= 1 | `knob_error`: >= 1; `fit_max_tokens` (engine/checks.py) bounds it by the context |

The serving values are the run config's `serve.default_temperature`, `serve.default_top_p` and
`serve.max_tokens` (harnessrl.config), the flags of `serve` / `rollout` / `eval` that set them
(app/flags.py), and the proxy's ServingPolicy (proxy/serving.py), which resolves them against what a
harness sends into the engine's SamplingParams (engine/base.py). The temperature each call used is
recorded with it and is the one the loss divides the logits by (train/: `CallRecord.temperature`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Protocol

from pydantic import Field

DEFAULT_TEMPERATURE = 1.0  # Claude Code, Codex and OpenClaw send none; a run config for a 135M model sets 0.7
DEFAULT_TOP_P = 1.0
DEFAULT_MAX_TOKENS = 256  # tokens per model reply: the default of a request that sets none, and its cap in a run

Temperature = Annotated[float, Field(ge=0, le=2)]
TopP = Annotated[float, Field(gt=0, le=1)]
MaxTokens = Annotated[int, Field(ge=1)]


class Asked(Protocol):
    """The knobs a request sends or an engine call asks, as one object (None: not asked): a
    protocol's ChatRequest, the engine's SamplingParams, or `Sent`. Layers pass it whole."""

    @property
    def temperature(self) -> float | None: ...

    @property
    def top_p(self) -> float | None: ...

    @property
    def max_tokens(self) -> int | None: ...


@dataclass(frozen=True)
class Sent:
    """Knobs asked outside a request object (a harness option); `NOT_SENT`: none asked."""

    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None


NOT_SENT = Sent()


def knob_error(asked: Asked) -> tuple[str, str] | None:
    """(message, knob) when a value asked of the engine is out of bounds, else None (None: not
    asked). The one check of what a request sends and of an engine call's SamplingParams (a
    request may ask for greedy, temperature 0)."""
    temperature, top_p, max_tokens = asked.temperature, asked.top_p, asked.max_tokens
    if max_tokens is not None and max_tokens < 1:
        return f"max_tokens must be at least 1, got {max_tokens}", "max_tokens"
    if temperature is not None and temperature < 0:
        return f"temperature must be >= 0, got {temperature}", "temperature"
    if top_p is not None and not 0 < top_p <= 1:
        return f"top_p must be in (0, 1], got {top_p}", "top_p"
    return None


def validate_params(asked: Asked) -> None:
    """ValueError when a knob an engine call asks is out of bounds (`knob_error`): what every
    engine checks of its SamplingParams before it samples."""
    bad = knob_error(asked)
    if bad is not None:
        raise ValueError(bad[0])
