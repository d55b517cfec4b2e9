"""Scripted policies for runner tests: they read the prompt and answer like an agent would."""

from __future__ import annotations

from typing import Any, Callable

from harnessrl.engine.scripted import ScriptedEngine
from harnessrl.tasks.model import Task


def plan_engine(renderer: Any, plan: dict[str, str | None]) -> ScriptedEngine:
    """plan: instruction -> the shell command to send in a ```bash block (None: answer without one).
    After seeing a command's output it answers "Done." (the final answer)."""

    def reply(prompt_ids: list[int]) -> list[int]:
        prompt = renderer.decode(prompt_ids)
        instruction = next((i for i in plan if i in prompt), None)
        if instruction is not None and "Exit code" in prompt[prompt.rindex(instruction):]:
            text = "Done."  # it has seen its command's output
        else:
            command = plan.get(instruction) if instruction else None
            text = "I give up." if command is None else f"```bash\n{command}\n```"
        return renderer.encode(text) + [renderer.eot_id]

    return ScriptedEngine(reply, eos_ids=renderer.stop_ids)


def solver_engine(renderer: Any, tasks: list[Task], solve: Callable[[Task], bool] = lambda t: True) -> ScriptedEngine:
    """Runs the reference solution of the tasks for which `solve(task)` holds; gives up on the others."""
    return plan_engine(renderer, {t.instruction: " && ".join(t.reference_solution) if solve(t) else None
                                  for t in tasks})
