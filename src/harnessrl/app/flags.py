"""The serving flags of `serve`, `rollout` and `eval`, generated from the RunConfig fields they set:
one name (FLAG_KEYS: the option -> the config key), one default (the field's, shown in --help; the
option itself defaults to None, so a flag not given keeps the config's value) and one bound (the
field's own constraint, checked once by RunConfig / ServingPolicy and reported with the flag's name).

    MAX_TURNS = config_option("max_turns", help="Model calls per rollout.")
"""

from __future__ import annotations

from typing import Any

import annotated_types
import typer
from pydantic.fields import FieldInfo

from harnessrl.run.config import RunConfig

# CLI option (the parameter name of `rollout` / `eval`) -> the run-config key it sets
FLAG_KEYS = {
    "model": "model.path",
    "engine": "engine.type",
    "sandbox": "sandbox.type",
    "concurrency": "loop.concurrency",
    "max_turns": "loop.max_turns",
    "timeout": "loop.rollout_timeout_s",
    "tool_format": "render.tool_format",
    "max_tokens": "loop.max_tokens",
    "default_temperature": "serve.default_temperature",
    "default_top_p": "serve.default_top_p",
    "temperature_mode": "serve.temperature_mode",
    "top_p_mode": "serve.top_p_mode",
    "max_tokens_mode": "serve.max_tokens_mode",
}
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
    """The field's bounds as --help shows them ("" when it has none): ">= 0, <= 2"."""
    signs = {attr: sign for _, attr, sign in _BOUNDS}
    return ", ".join(f"{signs[attr]} {value:g}" for attr, value in bounds(key).items())


def flag_name(name: str) -> str:
    return "--" + name.replace("_", "-")


def config_option(name: str, *shorts: str, help: str) -> Any:
    """The typer option of FLAG_KEYS[name]: None unless given; --help names the key, its default and
    its bound (checked by RunConfig, the error naming this flag)."""
    key = FLAG_KEYS[name]
    field = config_field(key)
    bound = bound_text(key)
    return typer.Option(None, flag_name(name), *shorts, show_default=f"{key}: {field.default}",
                        help=f"{help} Bound: {bound}." if bound else help)
