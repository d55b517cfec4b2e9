"""train = serve for `command:` harnesses: `serve --from-run` builds its renderer the way training
does (run/runner_collector.py: run_renderer), so a run whose `command[shell_tool=...]` harness names
a shell tool the schemas do not give away is served with that override, and the bash format drives
the same tool. Before, serve built a plain renderer and the override was lost."""

from __future__ import annotations

import ast
from pathlib import Path

from harnessrl.render.bash_format import ShellOverride
from harnessrl.render.messages import ToolSpec
from harnessrl.render.renderer import Renderer
from harnessrl.run.runner_collector import run_renderer

from tests.rollout.test_serve_config import TRAINED, _train_run_dir  # noqa: F401 - the run dir as train leaves it

SPEC = "command[shell_tool=do_it:steps:list]:client {task}"
OPAQUE = [ToolSpec("do_it", "runs things", {"type": "object", "properties": {"steps": {
    "type": "array", "items": {"type": "string"}}}, "required": ["steps"]})]
SRC = Path(__file__).resolve().parents[2] / "src" / "harnessrl"


def test_serve_from_run_renders_a_command_harness_with_its_shell_override(tmp_path):
    from harnessrl.app.serve import serve_plan

    run = _train_run_dir(tmp_path / "train", [*TRAINED[:-1], f"harnesses=[{{name: '{SPEC}'}}]"])
    plan = serve_plan(None, run, {}, None)
    served = run_renderer(plan.cfg, plan.cfg.model.path)
    assert served.info.shell_overrides == (ShellOverride("do_it", "steps", "list"),)
    assert served.info.shell_tool(OPAQUE) is not None  # the bash format drives do_it, as in training
    # control: the renderer serve built before (tool format only) finds no shell tool in the same request
    plain = Renderer.from_pretrained(plan.cfg.model.path, tool_format=plan.cfg.render.tool_format)
    assert plain.info.shell_tool(OPAQUE) is None


def _calls(path: Path, name: str) -> bool:
    calls = (n.func for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call))
    return any((isinstance(f, ast.Name) and f.id == name) or (isinstance(f, ast.Attribute) and f.attr == name)
               for f in calls)


def test_training_and_serve_build_the_run_renderer_one_way():
    users = {p.relative_to(SRC).as_posix() for p in SRC.rglob("*.py") if _calls(p, "run_renderer")}
    assert {"app/serve.py", "run/runner_collector.py"} <= users


def test_one_way_to_stand_up_serving_in_process():
    """A ProxyServer is built by runner_collector.start_proxy (training, rollout, eval, harness check,
    demos: all through `local_proxy` or the RunnerCollector) and by `serve` alone (its host, port and
    transport flags); a run config's renderer by run_renderer alone."""
    modules = {p.relative_to(SRC).as_posix(): p for p in SRC.rglob("*.py")}
    builders = {rel for rel, p in modules.items() if _calls(p, "ProxyServer")}
    assert builders == {"run/runner_collector.py", "app/serve.py"}
    in_process = {rel for rel, p in modules.items() if _calls(p, "local_proxy")}
    assert {"app/harness_check.py", "sft/demos.py"} <= in_process
    assert "app/rollout.py" in {rel for rel, p in modules.items() if "local_proxy" in p.read_text()}
    renderers = {rel for rel, p in modules.items() if _calls(p, "from_pretrained") and "Renderer" in p.read_text()}
    assert renderers <= {"run/runner_collector.py", "proxy/server.py", "render/renderer.py"}, renderers
