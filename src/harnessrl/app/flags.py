"""The serving flags of `serve`, `rollout` and `eval`, generated from the RunConfig fields they set:
one name (FLAG_KEYS: the option -> the config key), one default (the field's, shown in --help; the
option itself defaults to None, so a flag not given keeps the config's value) and one bound (the
field's own constraint, checked once by RunConfig / ServingPolicy and reported with the flag's name;
--help shows it beside the type as typer shows its own: `<float> [0<=x<=2]`).

    MAX_TURNS = config_option("max_turns", help="Model calls per rollout.")

The options every serving command shares (CONFIG, FROM_RUN, the sampling and render flags) are
defined here once; app/serve_config.py `config_of_flags` turns what was given into the RunConfig
they serve with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
import typer
from pydantic.fields import FieldInfo

from harnessrl.render.tool_formats import TOOL_FORMATS
from harnessrl.config import RunConfig

# CLI option (the parameter name of `serve` / `rollout` / `eval`) -> the run-config key it sets
FLAG_KEYS = {
    "model": "model.path",
    "engine": "engine.type",
    "sandbox": "sandbox.type",
    "concurrency": "loop.concurrency",
    "max_turns": "loop.max_turns",
    "timeout": "loop.rollout_timeout_s",
    "tool_format": "render.tool_format",
    "max_tokens": "serve.max_tokens",
    "default_temperature": "serve.default_temperature",
    "default_top_p": "serve.default_top_p",
    "temperature_mode": "serve.temperature_mode",
    "top_p_mode": "serve.top_p_mode",
    "max_tokens_mode": "serve.max_tokens_mode",
    "max_model_len": "engine.max_model_len",
}
SCRIPTED = "scripted"  # `--engine scripted`: a fixed reply, no weights (a smoke test; never in a run config)
_BOUNDS = ((annotated_types.Ge, "ge", ">="), (annotated_types.Gt, "gt", ">"), (annotated_types.Le, "le", "<="),
           (annotated_types.Lt, "lt", "<"))


def config_field(key: str) -> FieldInfo:
    """The RunConfig field of a dotted key ("loop.max_turns")."""
    section, name = key.split(".")
    model = RunConfig.model_fields[section].annotation
    assert isinstance(model, type) and hasattr(model, "model_fields"), key
    return model.model_fields[name]


def bounds(key: str) -> dict[str, float]:
    """The field's bounds as {"ge"|"gt"|"le"|"lt": value}."""
    out: dict[str, float] = {}
    for meta in config_field(key).metadata:
        for kind, attr, _ in _BOUNDS:
            if isinstance(meta, kind):
                out[attr] = getattr(meta, attr)
    return out


def bound_text(key: str) -> str:
    """The field's bounds ("" when it has none): ">= 0, <= 2"."""
    signs = {attr: sign for _, attr, sign in _BOUNDS}
    return ", ".join(f"{signs[attr]} {value:g}" for attr, value in bounds(key).items())


def range_text(key: str) -> str:
    """The field's bounds in typer's notation for a number range ("" when it has none): "x>=1",
    "0<=x<=2", "0<x<=1"."""
    b = bounds(key)
    low = next(((b[a], op) for a, op in (("ge", "<="), ("gt", "<")) if a in b), None)
    high = next(((b[a], op) for a, op in (("le", "<="), ("lt", "<")) if a in b), None)
    if low and high:
        return f"{low[0]:g}{low[1]}x{high[1]}{high[0]:g}"
    if low:
        return f"x{low[1].replace('<', '>')}{low[0]:g}"
    return f"x{high[1]}{high[0]:g}" if high else ""


def type_label(key: str) -> str:
    """The field's value type as typer labels it: <int>, <float>, <str>."""
    ann = config_field(key).annotation
    parts = get_args(ann) if get_origin(ann) in (Union, type(int | None)) else (ann,)
    for kind in (int, float):
        if any(p is kind or getattr(p, "__origin__", None) is kind for p in parts):
            return f"<{kind.__name__}>"
    return "<str>"


def choices(key: str) -> list[str]:
    """The values a Literal-typed field allows, in declaration order ([] for any other field);
    an optional Literal (`Literal[...] | None`) lists its values and "null"."""
    ann = config_field(key).annotation
    out: list[str] = []
    for part in (get_args(ann) if get_origin(ann) in (Union, type(int | None)) else (ann,)):
        if part is type(None):
            out.append("null")
        elif get_origin(part) is Literal:
            out.extend(str(v) for v in get_args(part))
    return out if any(v != "null" for v in out) else []


def flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def config_option(name: str, *shorts: str, help: str, allowed: Sequence[str] | None = None) -> Any:
    """The typer option of FLAG_KEYS[name]: None unless given; --help names the key, its default and
    its bound (beside the type, `<int> [x>=1]`; checked by RunConfig, the error naming this flag).
    `allowed`: the values this command takes, when fewer than the field's (listed once, in the help)."""
    key = FLAG_KEYS[name]
    field = config_field(key)
    bound = range_text(key)
    allowed = list(allowed) if allowed is not None else choices(key)
    if allowed and not all(v in help for v in allowed if v != "null"):  # unless the text names them
        help = f"{help} One of: {' | '.join(allowed)}."
    return typer.Option(None, flag_name(name), *shorts, show_default=f"{key}: {field.default}", help=help,
                        metavar=f"{type_label(key)} [{bound}]" if bound else None)


# -- the options `serve`, `rollout` and `eval` share ----------------------------------------------

CONFIG = typer.Option(None, "--config", "-c", help="A run config (YAML): serve as that training run would "
                      "(tool format, max tokens, sampling defaults and modes, engine; rollout/eval: also max "
                      "turns, sandbox, harness options); flags override it.")
FROM_RUN = typer.Option(None, "--from-run", help="A `harnessrl train` run directory: serve its last checkpoint "
                        "(checkpoints/step_N/policy; --model: other weights) exactly as it trained, from the "
                        "config it stored; flags override it.")
MODEL = config_option("model", "-m", help="smollm2-135m-instruct (null) or an HF dir or id, e.g. a run's "
                                          "checkpoints/step_N/policy.")
TOOL_FORMAT_HELP = (f"{' | '.join(TOOL_FORMATS)}: how the model writes tool calls (null = the chat template's "
                    "own). bash: one fenced ```bash block runs the harness's shell tool; bash_examples: the same, "
                    "with three worked examples as earlier turns (a 135M model needs them).")
TOOL_FORMAT = config_option("tool_format", help=TOOL_FORMAT_HELP)
MAX_TOKENS = config_option("max_tokens", help="Tokens per model reply: the default of a request that sets none "
                                              "and the cap whatever the harness asks.")
DEFAULT_TEMPERATURE = config_option("default_temperature", help="Sampling temperature of requests that send none.")
DEFAULT_TOP_P = config_option("default_top_p", help="top_p of requests that send none.")
MODE_HELP = ("default: a value the harness sends is used | force: the serving value ({}) replaces it; the call "
             "records both.")
TEMPERATURE_MODE = config_option("temperature_mode", help=MODE_HELP.format("--default-temperature"))
TOP_P_MODE = config_option("top_p_mode", help=MODE_HELP.format("--default-top-p"))
MAX_TOKENS_MODE = config_option("max_tokens_mode", help=MODE_HELP.format("--max-tokens"))
