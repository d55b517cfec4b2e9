"""What `harnessrl train` would refuse about a valid RunConfig on this machine, found before anything
is created or started: `config validate` reports it and `train` stops on it before it makes the run
directory. Each problem is one line that names the key and the fix.

    problems = run_problems(cfg)   # [] when train would start
"""

from __future__ import annotations

import difflib
import importlib.util
import shutil
from pathlib import Path

from harnessrl.config import RunConfig

# engine type (resolved) -> the modules it imports; the trainer itself needs torch and transformers
ENGINE_MODULES = {"hf": ("torch", "transformers"), "vllm": ("vllm",)}
TRAINER_MODULES = ("torch", "transformers")


def run_problems(cfg: RunConfig) -> list[str]:
    """Every problem `harnessrl train` would stop on with `cfg` here: harnesses (names, profiles,
    options, binaries, installs), the model, the task sets, the engine and trainer libraries, the sandbox."""
    return [*harness_problems(cfg), *model_problems(cfg.model.path), *task_problems(cfg), *engine_problems(cfg),
            *sandbox_problems(cfg.sandbox.type)]


def harness_problems(cfg: RunConfig) -> list[str]:
    """Each harness the run starts (trained or evaluated through) can be made and is installed."""
    from harnessrl.harness import HARNESS_NAMES, HarnessConfigError, is_command, make_harness

    out = []
    for h in cfg.harness_entries():
        try:
            adapter = make_harness(h.name, **dict(h.options))
            adapter.check()
        except (HarnessConfigError, TypeError) as err:
            name = h.name.partition(":")[0]
            near = [] if is_command(h.name) or name in HARNESS_NAMES else \
                difflib.get_close_matches(name, HARNESS_NAMES, n=1)
            out.append(f"harnesses: {h.name!r}" + (f" (did you mean {near[0]!r}?)" if near else "") + f": {err}")
            continue
        problem = adapter.preflight()
        if problem:
            out.append(f"harnesses: {h.name!r} cannot run: {problem}")
    return out


def model_problems(path: str | None) -> list[str]:
    """model.path resolves offline to an HF checkpoint (None: the default model, built on first use)."""
    from harnessrl.engine.model import ModelNotFound, resolve_model

    if path is None:
        return []
    local = Path(path).expanduser()
    if not local.exists() and (path.startswith(("/", ".", "~")) or path.count("/") != 1):
        return [f"model.path: {path} does not exist; pass an HF checkpoint directory, an HF id 'org/name' in the "
                f"local HF cache, or null for the default model"]
    try:
        resolve_model(path)
    except ModelNotFound as err:
        return [f"model.path: {err}"]
    return []


def task_problems(cfg: RunConfig) -> list[str]:
    """The train split and every eval set load (a missing task directory is named as such)."""
    from harnessrl.errors import HarnessRLError
    from harnessrl.run.task_sets import default_tasks

    suite = cfg.tasks.suite
    if suite != "builtin" and ":" not in suite and not Path(suite).exists():
        return [f"tasks.suite: {suite} does not exist; pass a task directory (or a directory of them) or builtin"]
    try:
        default_tasks(cfg)
    except HarnessRLError as err:
        return [str(err)]
    return []


def engine_problems(cfg: RunConfig) -> list[str]:
    """The engine backend and the trainer's libraries are importable; so is Ray with cluster.backend=ray."""
    from harnessrl.engine.factory import resolve_engine_type

    kind = resolve_engine_type(cfg.engine.type)
    out = []
    missing = [m for m in ENGINE_MODULES.get(kind, ()) if importlib.util.find_spec(m) is None]
    if missing:
        out.append(f"engine.type={cfg.engine.type}: the {kind} engine needs {', '.join(missing)}, which this "
                   f"Python cannot import; install it or set engine.type=auto (vllm when importable, else hf)")
    trainer = [m for m in TRAINER_MODULES if m not in missing and importlib.util.find_spec(m) is None]
    if trainer:
        out.append(f"the trainer needs {', '.join(trainer)}, which this Python cannot import; install harnessrl "
                   "with its dependencies (pip install -e .)")
    if cfg.cluster.backend == "ray" and importlib.util.find_spec("ray") is None:
        out.append("cluster.backend=ray: ray is not importable here; pip install 'ray[default]' or set "
                   "cluster.backend=local")
    return out


def sandbox_problems(kind: str) -> list[str]:
    """bwrap is on PATH when the rollouts run in bwrap."""
    if kind == "bwrap" and shutil.which("bwrap") is None:
        return ["sandbox.type=bwrap: bwrap is not on PATH; apt-get install bubblewrap, or set sandbox.type=local "
                "(no isolation)"]
    return []
