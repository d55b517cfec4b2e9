"""The RunConfig `harnessrl serve` / `rollout` / `eval` serve with: a config file (`--config`) or a
training run's stored config (`--from-run`, serving the run's last checkpoint unless --model names
other weights), else the defaults, then every flag that was given, set as the typed value the flag
parsed (`config_of_flags`: the same, with a bad value a usage error, exit 2). They stand up serving
through harnessrl.launch (`local_proxy`, `open_proxy`), as a training run does.

    cfg = serving_config(None, Path("runs/demo"), {"max_turns": 6})   # runs/demo's last checkpoint, 6 turns
    with local_proxy(cfg, store) as link:
        run_groups(tasks, harness_specs(cfg, None), n, proxy=link, store=store, ...)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Collection, Mapping

import typer

from harnessrl.app.flags import FLAG_KEYS, SCRIPTED, flag_name
from harnessrl.config import ConfigError, RunConfig, config_with, read_config
from harnessrl.store import RunStore
from harnessrl.store.schema import DB_NAME


def stored_config(run_dir: Path) -> dict[str, Any]:
    """The config a `harnessrl train` run stored in its run directory (ConfigError with the fix when
    the directory is missing, holds no run store, or was not written by a training run)."""
    if not run_dir.is_dir():
        raise ConfigError(f"run directory {run_dir} does not exist; pass the output.run_dir of a "
                          f"`harnessrl train` run")
    if not (run_dir / DB_NAME).is_file():
        raise ConfigError(f"{run_dir} is not a run directory (no {DB_NAME}); pass the output.run_dir of a "
                          f"`harnessrl train` run")
    with RunStore(run_dir) as store:
        data = store.get_meta("config")
    if not isinstance(data, dict):
        raise ConfigError(f"{run_dir} holds no run config (it was written by `harnessrl rollout`, `eval` or "
                          f"`serve`, not `harnessrl train`); pass --config FILE instead")
    return data


def last_checkpoint_policy(run_dir: Path) -> Path:
    """The weights of a training run's newest complete checkpoint, RUN/checkpoints/step_N/policy (a
    plain HF directory; a checkpoint is renamed into place whole, train/checkpoint.py). ConfigError
    with the fix when the run has none yet."""
    found = [(int(p.name.split("_")[1]), p / "policy") for p in (run_dir / "checkpoints").glob("step_*")
             if p.name.split("_")[1].isdigit() and (p / "policy" / "config.json").is_file()]
    if not found:
        raise ConfigError(f"{run_dir} has no checkpoint yet (no {run_dir / 'checkpoints'}/step_*/policy): let "
                          f"`harnessrl train` write one, or pass --model to serve other weights with its settings")
    return max(found)[1]


def flag_values(flags: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """({config key: value}, {config key: "--flag value"}) of the flags of FLAG_KEYS that were given
    (not None), typed as the flags parsed them. `--engine scripted` sets no key: it is no run engine
    (see harnessrl.launch `scripted_engine`)."""
    given = {name: v for name, v in flags.items() if name in FLAG_KEYS and v is not None
             and not (name == "engine" and v == SCRIPTED)}
    return ({FLAG_KEYS[n]: v for n, v in given.items()}, {FLAG_KEYS[n]: f"{flag_name(n)} {v}" for n, v in given.items()})


def serving_config(config: Path | None, from_run: Path | None, flags: Mapping[str, Any]) -> RunConfig:
    """The RunConfig to serve with: `config` (a YAML file) or `from_run` (a training run's directory:
    its stored config, model.path its last checkpoint unless flags["model"] is given) or the defaults,
    with each flag of FLAG_KEYS that is not None set on top (explicit flags win). ConfigError names
    an invalid key with the flag that set it."""
    if config is not None and from_run is not None:
        raise ConfigError("pass --config FILE or --from-run DIR, not both")
    stored = stored_config(from_run) if from_run is not None else None  # a dir holding no run is named first
    if from_run is not None and flags.get("model") is None:
        flags = {**flags, "model": str(last_checkpoint_policy(from_run))}
    values, labels = flag_values(flags)
    if stored is not None:
        return config_with(stored, values, labels, source=f"the config stored in {from_run}")
    return config_with(read_config(config), values, labels, source=str(config or "config"))


def config_of_flags(config: Path | None, from_run: Path | None, flags: Mapping[str, Any],
                    engines: Collection[str]) -> RunConfig:
    """The RunConfig a command's flags serve with (`serving_config`). A bad value, an --engine
    outside `engines` or a missing file / run exits 2 with the fix, the flag and its value named
    next to the key it set, before anything is loaded or a run store is opened."""
    engine = flags.get("engine")
    if engine is not None and engine not in engines:
        raise typer.BadParameter(f"--engine must be one of {', '.join(engines)}")
    try:
        return serving_config(config, from_run, flags)
    except ConfigError as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(code=2) from None


def harness_specs(cfg: RunConfig, given: list[str] | None, evaluated: bool = False) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """(harness specs, {spec: adapter options}): `RunConfig.harness_specs`."""
    return cfg.harness_specs(given, evaluated)
