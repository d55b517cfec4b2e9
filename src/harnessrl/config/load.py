"""Reading a run config: YAML files, `key=value` overrides with dotted keys (`loop.steps=3`,
`harnesses.0.weight=2`) and YAML scalars/lists for values, typed overrides (a nested mapping, as
flags give them), and errors that name every invalid key. `validate_files` checks every shipped
config (`harnessrl config validate configs/*.yaml`)."""

from __future__ import annotations

import copy
import difflib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError

from harnessrl.config.migrate import migrate
from harnessrl.config.schema import RunConfig
from harnessrl.errors import HarnessRLError


class ConfigError(HarnessRLError, ValueError):
    """A config file or override is invalid; the message names the key and the fix."""


def apply_override(data: dict, dotted: str) -> None:
    """Set `a.b.c=value` in a nested dict/list (list items by index); value parsed as YAML."""
    if "=" not in dotted:
        raise ConfigError(f"override {dotted!r} must look like key.sub=value")
    key, raw = dotted.split("=", 1)
    try:
        value = yaml.safe_load(raw) if raw != "" else None
    except yaml.YAMLError as err:
        raise ConfigError(f"override {dotted!r}: the value is not valid YAML ({getattr(err, 'problem', err)}); "
                          "quote it for the shell, e.g. 'harnesses=[{name: builtin}]'") from None
    parts = key.strip().split(".")
    node: Any = data
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ConfigError(f"override {key!r}: {part!r} is not an index of a {len(node)}-item list")
            idx: Any = int(part)
        else:
            idx = part
        if last:
            node[idx] = value
        else:
            if isinstance(node, dict) and idx not in node:
                node[idx] = {}
            node = node[idx]


def read_config(path: str | Path | None) -> dict:
    """The sections a YAML RunConfig file holds ({} when path is None: the defaults)."""
    if path is None:
        return {}
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file {p} does not exist")
    try:
        data = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"{p}: not valid YAML: {err}") from err
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: the top level must be a mapping of sections")
    return data


def load_config(path: str | Path | None, overrides: Sequence[str] = ()) -> RunConfig:
    """Read a YAML RunConfig (or the defaults when path is None) and apply overrides."""
    return build_config(read_config(path), overrides, source=str(path or "config"))


def build_config(data: dict, overrides: Sequence[str] = (), source: str = "config") -> RunConfig:
    """A RunConfig from a mapping of sections (a file's, or one stored by a run) and overrides;
    ConfigError names `source` and every invalid key."""
    data = copy.deepcopy(data)
    for o in overrides:
        apply_override(data, o)
    try:
        return RunConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(invalid_message(err, source, overrides)) from err


def config_with(data: dict, values: Mapping[str, Any], labels: Mapping[str, str], source: str) -> RunConfig:
    """A RunConfig from a mapping of sections with typed values set on top (`values`: dotted key ->
    value, as a command's flags give them; older keys in `data` migrated first, so a value given
    under a new key never meets its old name). ConfigError names every invalid key, and the flag
    that set it (`labels`: dotted key -> "--flag value")."""
    data = migrate(copy.deepcopy(data))
    for key, value in values.items():
        section, name = key.split(".")
        node = data.setdefault(section, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{source}: {section} must be a mapping of keys")
        node[name] = value
    try:
        return RunConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(invalid_message(err, source, labels=labels)) from err


def invalid_message(err: ValidationError, source: str, overrides: Sequence[str] = (),
                    labels: Mapping[str, str] | None = None) -> str:
    """One line per invalid key, an unknown key with the nearest valid one ("did you mean
    loop.steps?"); headed by the override(s) that set the keys when they did (`loop.stpes=3`), else
    by `source`. `labels` (dotted key -> "--flag value"): a key a flag set is named with the flag,
    and the flags head the message when they set every invalid key."""
    lines, blamed = [], []
    labels = labels or {}
    for e in err.errors():
        key = ".".join(map(str, e["loc"])) or "<root>"
        hint = ""
        if e["type"] == "extra_forbidden":
            near = difflib.get_close_matches(str(e["loc"][-1]), valid_keys(e["loc"][:-1]), n=1)
            hint = f"; did you mean {'.'.join(map(str, (*e['loc'][:-1], near[0])))}?" if near else ""
        label = next((v for k, v in labels.items() if _sets(k, key)), None)
        override = label or next((o for o in overrides if _sets(o, key)), None)
        blamed.append(override)
        lines.append(f"  {key}{f' ({label})' if label else ''}: {e['msg']}{hint}")
    if blamed and all(blamed):
        given = ", ".join(dict.fromkeys(o for o in blamed if o))
        head = f"{given} is invalid" if all(o in labels.values() for o in blamed) else f"override {given} is invalid"
    else:
        head = f"{source} is invalid" + (f" (with {', '.join(overrides)})" if any(blamed) else "")
    return head + ":\n" + "\n".join(lines)


def _sets(override: str, key: str) -> bool:
    """Whether `override` ("loop.steps=3") set `key` (dotted), a key under it, or a section holding it."""
    target = override.partition("=")[0].strip()
    return key == target or key.startswith(target + ".") or target.startswith(key + ".")


def valid_keys(loc: Sequence[str | int]) -> list[str]:
    """The keys the config takes at `loc` (a pydantic error location: sections, list indexes)."""
    model: Any = RunConfig
    for part in loc:
        if isinstance(part, int) or model is None:
            continue  # an item of a list: the item's model
        field = model.model_fields.get(part)
        if field is None:  # a union's member named by pydantic ("EvalSet")
            continue
        model = _model_in(field.annotation)
    return list(model.model_fields) if model is not None else []


def _model_in(annotation: Any) -> Any:
    """The pydantic model an annotation holds (X, X | None, list[X | str]), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return next((m for m in map(_model_in, get_args(annotation)) if m is not None), None)


def validate_files(paths: list[str | Path]) -> dict[str, str]:
    """Validate each file; returns {path: "ok" | error message}."""
    out = {}
    for p in paths:
        try:
            load_config(p)
            out[str(p)] = "ok"
        except ConfigError as err:
            out[str(p)] = str(err)
    return out
