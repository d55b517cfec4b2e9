"""The walk of each knob, pinned (issue 40): the src modules that hand temperature, top_p,
max_tokens and loop.branching on, from the config key or flag to where each takes effect, read
from the source with ast (nothing is imported). A module that starts to read, pass or build one
of them fails here: put the work where the walk already goes (docs/training.md, "Knobs", lists
each walk hop by hop), or add the module to the pin on purpose.

- the sampling knobs: app/flags.py names the config keys; the serve section's fields are read by
  config/sections.py alone, which builds the proxy's ServingPolicy; the policy goes whole through
  launch.py and proxy/server.py to proxy/calls.py, which checks a request (engine/knobs.py),
  resolves it and makes the engine's SamplingParams in one call (proxy/serving.py sampling_params);
- the recorded temperature: the store, the tree and the trainer read it; the step (run/), algo/
  and report/ never touch it (train/ may read it wherever it computes the policy's logprobs);
- loop.branching: read by the config checks and, in the step, by run/step_groups.py alone, which
  passes the BranchingConfig whole to rollout/branching.py.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from pathlib import Path

import harnessrl

SRC = Path(harnessrl.__file__).resolve().parent


@functools.cache
def _modules() -> tuple[tuple[str, tuple[ast.AST, ...]], ...]:
    """Each module of src/harnessrl with its nodes, parsed once."""
    return tuple((path.relative_to(SRC).as_posix(), tuple(ast.walk(ast.parse(path.read_text()))))
                 for path in sorted(SRC.rglob("*.py")))


def _dotted(node: ast.expr) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def _where(hit: Callable[[ast.AST], bool], under: tuple[str, ...] = ()) -> set[str]:
    """The modules (relative to src/harnessrl, optionally only those under `under`) with a node `hit` accepts."""
    return {m for m, nodes in _modules() if (not under or m.startswith(under)) and any(hit(n) for n in nodes)}


def _reads(*attrs: str) -> Callable[[ast.AST], bool]:
    return lambda n: isinstance(n, ast.Attribute) and n.attr in attrs


def _calls(*names: str) -> Callable[[ast.AST], bool]:
    return lambda n: isinstance(n, ast.Call) and _dotted(n.func).rpartition(".")[2] in names


def _names(*names: str) -> Callable[[ast.AST], bool]:
    return lambda n: (isinstance(n, ast.Name) and n.id in names) or (isinstance(n, ast.Attribute) and n.attr in names)


def test_the_sampling_knobs_config_keys_are_named_by_the_flags_alone():
    keys = {"serve.default_temperature", "serve.default_top_p", "serve.max_tokens"}
    named = _where(lambda n: isinstance(n, ast.Constant) and n.value in keys)
    assert named == {"app/flags.py", "config/migrate.py"}  # FLAG_KEYS; migrate: loop.max_tokens -> serve.max_tokens


def test_the_serve_sections_knobs_are_read_where_the_policy_is_built():
    fields = ("default_temperature", "default_top_p", "temperature_mode", "top_p_mode", "max_tokens_mode",
              "max_tokens_cap")
    assert _where(_reads(*fields)) == {"config/sections.py", "proxy/serving.py"}
    assert _where(_calls("ServingPolicy")) == {"config/sections.py", "proxy/serving.py", "proxy/server.py"}
    # the section's policy is asked for where a proxy is stood up: launch.py (train, rollout, eval) and serve
    assert _where(lambda n: isinstance(n, ast.Call) and _dotted(n.func).endswith("serve.policy")) == \
        {"app/serve.py", "launch.py"}


def test_the_serving_policy_travels_whole_to_the_call_handler():
    assert _where(_names("ServingPolicy")) == {"config/sections.py", "app/serve.py", "launch.py", "proxy/server.py",
                                               "proxy/calls.py", "proxy/serving.py"}


def test_one_call_makes_the_engines_params_and_one_check_guards_them():
    assert _where(_calls("sampling_params")) == {"proxy/calls.py"}
    # proxy/serving.py: a call's params; served_drift: its own probe calls; vllm_engine: a one-token probe
    assert _where(_calls("SamplingParams")) == {"proxy/serving.py", "train/served_drift.py", "engine/vllm_engine.py"}
    engines = {"engine/hf.py", "engine/vllm_engine.py", "engine/vllm_server.py", "engine/sglang_server.py"}
    assert _where(_calls("knob_error", "validate_params")) == \
        engines | {"engine/knobs.py", "proxy/calls.py", "harness/whitebox.py"}  # whitebox: its own options
    # max_tokens is bounded by the context where the proxy makes the params and in each engine (a direct caller)
    assert _where(_calls("fit_max_tokens")) == engines | {"engine/scripted.py", "proxy/serving.py"}


def test_the_recorded_temperature_goes_from_the_store_to_the_loss_past_the_step():
    temperature = _reads("temperature")
    assert _where(temperature, under=("run/", "algo/", "report/")) == set()  # the step never relays it
    assert _where(temperature, under=("store/", "tree/")) == {"store/schema.py", "store/export.py", "tree/build.py",
                                                             "tree/view_html.py"}
    assert {"train/batch.py", "train/trainer.py"} <= _where(temperature, under=("train/",))  # the batch, the loss


def test_loop_branching_is_read_by_the_config_checks_and_one_step_module():
    assert _where(_reads("branching")) == {"config/sections.py", "config/schema.py", "run/step_groups.py"}
    assert _where(_names("BranchingConfig")) == {"config/sections.py", "rollout/branching.py"}
    assert _where(_calls("branch_plans")) == {"run/step_groups.py"}
