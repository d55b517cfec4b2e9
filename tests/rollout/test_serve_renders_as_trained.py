"""train = serve: `serve --from-run` renders the prompt ids the run recorded, for every shipped
harness profile and for a `command[shell_tool=...]` harness (whose shell tool the schemas do not
give away: before, serve built a plain renderer and the override was lost). Both sides stand up
serving through harnessrl.launch, the one place a ProxyServer and the scripted engine are built
(grep tests below)."""

from __future__ import annotations

import ast
from pathlib import Path

import httpx
import pytest

from harnessrl.harness import HARNESS_NAMES, adapter_class
from harnessrl.launch import Transport, run_renderer, scripted_engine, served_model_dir, start_proxy
from harnessrl.render.bash_format import ShellOverride
from harnessrl.render.messages import ToolSpec
from harnessrl.render.renderer import Renderer
from harnessrl.config import load_config
from harnessrl.store import RunStore

from tests.rollout.test_serve_config import TRAINED, _checkpoint, _train_run_dir  # the run dir as train leaves it

SPEC = "command[shell_tool=do_it:steps:list]:client {task}"
OPAQUE = [ToolSpec("do_it", "runs things", {"type": "object", "properties": {"steps": {
    "type": "array", "items": {"type": "string"}}}, "required": ["steps"]})]
SRC = Path(__file__).resolve().parents[2] / "src" / "harnessrl"


def _shipped_specs() -> list[str]:
    """Every shipped harness with each of its profiles (`name:profile`), and a command: harness."""
    specs = []
    for name in HARNESS_NAMES:
        cls = adapter_class(name)
        assert cls is not None
        specs += [f"{name}:{p}" for p in dict.fromkeys(p.name for p in cls.profiles.values())]
    return [*specs, SPEC]


def _tools() -> list[dict]:
    """The opaque tool of the command: harness and a plain shell tool, as a harness sends them."""
    bash = {"type": "function", "function": {"name": "Bash", "description": "run a command", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}
    return [{"type": "function", "function": {"name": t.name, "description": t.description,
                                              "parameters": t.parameters}} for t in OPAQUE] + [bash]


def _prompt_ids(server, rollout: str) -> list[int]:
    """The prompt ids the proxy records for one call with the tools above."""
    key = server.register_rollout(rollout)
    body = {"model": "m", "max_tokens": 8, "tools": _tools(), "messages": [
        {"role": "system", "content": "You are a careful agent."}, {"role": "user", "content": "list the files"}]}
    reply = httpx.post(f"{server.base_urls(key)['openai']}/chat/completions", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    server.close_rollout(key)
    (call,) = [c for c in server.store.list_calls() if c.rollout_id == rollout]
    return list(call.prompt_ids)


@pytest.mark.parametrize("specs", [_shipped_specs(), [SPEC]], ids=["every-shipped-profile", "command"])
def test_serve_from_run_renders_the_prompt_ids_the_run_recorded(tmp_path, specs):
    """A run that trained through every shipped harness profile and a command: harness (one renderer
    serves them all), and one through the command: harness alone."""
    from harnessrl.app.serve import open_served, serve_engine, serve_plan

    entries = ", ".join(f"{{name: '{s}'}}" for s in specs)
    cfg = load_config(None, [*TRAINED[:-1], f"harnesses=[{entries}]"])
    run = tmp_path / "train"
    with RunStore(run) as store:  # the run's proxy, as RunnerCollector starts it
        store.set_meta("config", cfg.model_dump(mode="json"))
        model_dir = served_model_dir(cfg.model.path, scripted=True)
        renderer = run_renderer(cfg, model_dir)
        engine = scripted_engine(model_dir, renderer, None)
        server = start_proxy(cfg, engine, store, renderer)
        try:
            recorded = _prompt_ids(server, "train-0")
        finally:
            server.stop()
    _checkpoint(run, 2)
    plan = serve_plan(None, run, {"engine": "scripted"}, None)
    served_dir, served_renderer, served_engine = serve_engine(plan)
    with RunStore(tmp_path / "served") as store:  # `harnessrl serve --from-run RUN`
        server = open_served(plan, served_dir, served_renderer, served_engine, store, Transport())
        try:
            assert _prompt_ids(server, "serve-0") == recorded
        finally:
            server.stop()
    # the bash format drives the opaque tool, in training and in serve alike
    assert served_renderer.info.shell_overrides == (ShellOverride("do_it", "steps", "list"),)
    assert served_renderer.info.shell_tool(OPAQUE) is not None


def test_a_plain_renderer_loses_the_command_harness_shell_tool(tmp_path):
    """The control: the renderer serve built before (tool format only) finds no shell tool in the
    request the command: harness sends, so it rendered other prompt ids than the run trained on."""
    from harnessrl.app.serve import serve_plan

    run = _train_run_dir(tmp_path / "train", [*TRAINED[:-1], f"harnesses=[{{name: '{SPEC}'}}]"])
    plan = serve_plan(None, run, {}, None)
    assert run_renderer(plan.cfg, plan.cfg.model.path).info.shell_tool(OPAQUE) is not None
    plain = Renderer.from_pretrained(plan.cfg.model.path, tool_format=plan.cfg.render.tool_format)
    assert plain.info.shell_tool(OPAQUE) is None


def _calls(path: Path, name: str) -> bool:
    calls = (n.func for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call))
    return any((isinstance(f, ast.Name) and f.id == name) or (isinstance(f, ast.Attribute) and f.attr == name)
               for f in calls)


def _modules() -> dict[str, Path]:
    return {p.relative_to(SRC).as_posix(): p for p in SRC.rglob("*.py")}


def test_one_way_to_stand_up_serving():
    """A ProxyServer is built by harnessrl.launch `open_proxy` alone (serve, train, rollout, eval,
    harness check, the demos: through it or `start_proxy` / `local_proxy`, which call it); the
    scripted engine a command serves by `scripted_engine` alone (engine/factory.py builds one for a
    config that names a script); a run config's renderer by `run_renderer` alone."""
    modules = _modules()
    assert {rel for rel, p in modules.items() if _calls(p, "ProxyServer")} == {"launch.py"}
    assert {rel for rel, p in modules.items() if _calls(p, "open_proxy")} == {"launch.py", "app/serve.py"}
    assert {rel for rel, p in modules.items() if _calls(p, "ScriptedEngine")} == {"launch.py", "engine/factory.py"}
    in_process = {rel for rel, p in modules.items() if _calls(p, "local_proxy")}
    assert "app/harness_check.py" in in_process and any(rel.endswith("demos.py") for rel in in_process)
    assert "app/rollout.py" in {rel for rel, p in modules.items() if "local_proxy" in p.read_text()}
    assert {rel for rel, p in modules.items() if _calls(p, "start_proxy")} >= {"run/runner_collector.py"}
    renderers = {rel for rel, p in modules.items() if _calls(p, "from_pretrained") and "Renderer" in p.read_text()}
    assert renderers <= {"launch.py", "proxy/server.py", "render/renderer.py"}, renderers
    users = {rel for rel, p in modules.items() if _calls(p, "run_renderer")}
    assert {"app/serve.py", "run/runner_collector.py"} <= users
    # the shell tools a served command: harness names are computed by launch.shell_tools alone
    assert {rel for rel, p in modules.items() if _calls(p, "shell_tool_overrides")} == {"launch.py"}
