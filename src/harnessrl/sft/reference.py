"""The reference policy: each task's reference solution (Task.reference_solution), served by the
scripted engine as a model's replies, so that it drives an unmodified harness like a model would.

Each model call gets the next command of the task's solution as one ```bash block (the `bash` and
`bash_examples` tool formats: the renderer turns the block into a call of the harness's own shell
tool, and a plain-chat agent such as the builtin one runs the block itself), then "Done." once
every command ran. The policy reads only what a model reads, the prompt:

- the task is the one whose instruction the prompt holds (the longest such instruction, so that
  an instruction that is part of another never wins);
- the step is how many commands of its solution the prompt already holds, in order, after the
  instruction (each as the block the policy wrote: the proxy renders history as it was sampled).

A prompt without a known instruction (a harness's side call, e.g. a title request) gets a short
plain reply. The proxy records every reply exactly as it records a model's (token ids, logprobs
of the scripted engine, policy version 0), so `harnessrl sft` trains on the passing rollouts as
on any other run (sft/data.py: rejection_trees).

    script = reference_script(renderer, tasks)
    engine = make_engine(EngineConfig(type="scripted", model=str(model_dir), script=script, ...))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable

from harnessrl.errors import HarnessRLError
from harnessrl.render.bash_format import render_command

if TYPE_CHECKING:
    from harnessrl.render.renderer import Renderer
    from harnessrl.tasks.model import Task

BASH_FORMATS = ("bash", "bash_examples")  # the tool formats whose action is a ```bash block
DONE = "Done."
UNKNOWN = "I have no task to do here."


class ReferencePolicyError(HarnessRLError, ValueError):
    """The reference policy cannot serve these tasks (the message says which and the fix)."""


@dataclass(frozen=True)
class Plan:
    """instruction -> its commands, and the instructions longest first (the order they are matched in)."""

    commands: dict[str, tuple[str, ...]]
    order: tuple[str, ...]


def reference_plan(tasks: Iterable[Task], tool_format: str | None) -> Plan:
    """The reference solutions of `tasks` by instruction. Refuses a tool format whose action is not a
    ```bash block, a task without a reference solution, and two tasks with one instruction and
    different solutions (the prompt could not tell them apart)."""
    if tool_format not in BASH_FORMATS:
        raise ReferencePolicyError(f"the reference policy writes ```bash blocks; render.tool_format is "
                                   f"{tool_format!r}. Fix: serve with --tool-format bash_examples (or bash)")
    commands: dict[str, tuple[str, ...]] = {}
    for t in tasks:
        if not t.reference_solution:
            raise ReferencePolicyError(f"task {t.id} has no reference solution. Fix: leave it out of the demo tasks")
        known = commands.setdefault(t.instruction, tuple(t.reference_solution))
        if known != tuple(t.reference_solution):
            raise ReferencePolicyError(f"task {t.id} has the instruction of another task with another reference "
                                       "solution; a reference policy cannot tell them apart. Fix: run them apart")
    if not commands:
        raise ReferencePolicyError("no tasks to serve")
    return Plan(commands, tuple(sorted(commands, key=len, reverse=True)))


def next_reply(prompt: str, plan: Plan) -> str:
    """The reply of the reference policy to a decoded prompt."""
    instruction = next((i for i in plan.order if i in prompt), None)
    if instruction is None:
        return UNKNOWN
    at = prompt.index(instruction) + len(instruction)
    commands = plan.commands[instruction]
    for command in commands:
        block = render_command(command)
        found = prompt.find(block, at)
        if found < 0:
            return block
        at = found + len(block)
    return DONE


def reference_script(renderer: Renderer, tasks: Iterable[Task], tool_format: str | None = "bash_examples"
                     ) -> Callable[[list[int]], list[int]]:
    """The scripted engine's script (prompt ids -> reply ids, ending with the end-of-turn id) of
    the reference policy over `tasks`."""
    plan = reference_plan(tasks, tool_format)

    def script(prompt_ids: list[int]) -> list[int]:
        return list(renderer.encode(next_reply(renderer.decode(prompt_ids), plan))) + [renderer.eot_id]

    return script
