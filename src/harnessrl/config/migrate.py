"""Old configs still load: moved keys go to their new place, removed keys are dropped, each with a
FutureWarning that names the key and what to do; keys a run sets itself are refused with the fix."""

from __future__ import annotations

import warnings
from typing import Any

from harnessrl.engine.factory import TRAINABLE_ENGINES, EngineConfig

# old key -> new key (dotted, any depth); the value moves and a warning says so
MOVED_KEYS = {
    "engine.max_concurrency": "engine.max_batch",
    "loop.max_tokens": "serve.max_tokens",  # the per-call budget sits with its mode (serve.max_tokens_mode)
    "loop.branching.policy": "loop.branching.placement",  # "policy" names the trained model only
}
# removed key -> why; the key is dropped with a warning
REMOVED_KEYS = {
    "loop.temperature": "harnesses choose their own sampling temperature (set it through "
                        "harnesses[].options, e.g. extra_args: [--temperature, '1.0']); every call records it",
    "output.save_final": "the last step is always checkpointed (output.checkpoint_every, keep_checkpoints)",
    "algorithm.value_coef": "the critic has its own optimizer; algorithm.critic_lr sets the size of its steps",
}
# key -> the fix; a run sets these itself, so a config that sets one is refused (a stored config's
# default value, as older runs recorded it, is dropped)
REFUSED_KEYS = {
    "engine.model": "the run serves its own policy: set the model with model.path, not engine.model",
    "engine.base_url": "a run lists its servers in engine.base_urls (one URL per replica), not engine.base_url",
    "engine.script": "the scripted engine cannot be trained; a run's engine.type is one of "
                     f"{', '.join(TRAINABLE_ENGINES)}",
    "engine.eos_ids": "the run's engine takes its stop tokens from the model's own config",
}


def migrate(data: dict) -> dict:
    """Old configs still load: moved keys go to their new place, removed keys are dropped; each
    change is reported as a FutureWarning that names the key and what to do. A key the run sets
    itself (REFUSED_KEYS) raises ValueError with the fix."""
    data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
    for key, fix in REFUSED_KEYS.items():
        sec, name = key.split(".")
        section = data.get(sec)
        if isinstance(section, dict) and name in section:
            if not _is_default(section.pop(name), EngineConfig.model_fields[name].default):
                raise ValueError(f"{key}: {fix}")
    for old, new in MOVED_KEYS.items():
        opath, npath = old.split("."), new.split(".")
        parent = _section(data, opath[:-1])
        if parent is None or opath[-1] not in parent:
            continue
        value = parent.pop(opath[-1])
        target = _section(data, npath[:-1], create=True)
        if target is None:
            raise ValueError(f"{old} moved to {new}, but {'.'.join(npath[:-1])} is not a mapping")
        if npath[-1] in target:
            raise ValueError(f"{old} and {new} are both set; {old} is the old name of {new}: keep only {new}")
        target[npath[-1]] = value
        warnings.warn(f"config key {old} is now {new}; please rename it", FutureWarning, stacklevel=2)
    for old, why in REMOVED_KEYS.items():
        sec, key = old.split(".")
        section = data.get(sec)
        if isinstance(section, dict) and key in section:
            section.pop(key)
            warnings.warn(f"config key {old} was removed and is ignored: {why}", FutureWarning, stacklevel=2)
    return data


def _section(data: dict, path: list[str], create: bool = False) -> dict | None:
    """The mapping at `path` under `data`, each level copied in place (the caller's dicts stay as
    they were); None when a level is missing (unless `create`) or is not a mapping."""
    node = data
    for part in path:
        child = node.get(part)
        if child is None and create:
            child = {}
        if not isinstance(child, dict):
            return None
        node[part] = child = dict(child)
        node = child
    return node


def _is_default(value: Any, default: Any) -> bool:
    if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
        return list(value) == list(default)
    return value is None or value == default
