"""The reference policy (sft/reference.py) and reference demonstrations (sft/demos.py):
the policy reads the task and the step from the prompt alone; through the builtin agent in a local
sandbox it passes read-then-act tasks at k = 2 and 3, the proxy records its calls like a model's, and
the rejection-sampling reader of `harnessrl sft` finds exactly those calls' tokens."""

from __future__ import annotations

import warnings
from dataclasses import replace

import pytest

from harnessrl.render.bash_format import render_command, render_result
from harnessrl.config import load_config
from harnessrl.sft.reference import DONE, UNKNOWN, ReferencePolicyError, next_reply, reference_plan, reference_script
from harnessrl.tasks import load_tasks


class CharRenderer:
    """A fake renderer: one id per character."""

    eot_id = 0

    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: list[int]) -> str:
        return "".join(chr(i) for i in ids if i)


def _conversation(instruction: str, commands: list[str]) -> str:
    turns = ["<sys>Examples: ```bash\nrm old.md\n```", f"<user>{instruction}"]
    for c in commands:
        turns += [f"<assistant>{render_command(c)}", f"<user>{render_result('ok')}"]
    return "\n".join(turns + ["<assistant>"])


def test_the_policy_follows_the_solution_step_by_step():
    task = load_tasks("builtin:lookup:long")[0]
    plan = reference_plan([task], "bash_examples")
    solution = list(task.reference_solution)
    assert len(solution) == 3
    for step in range(len(solution)):
        assert next_reply(_conversation(task.instruction, solution[:step]), plan) == render_command(solution[step])
    assert next_reply(_conversation(task.instruction, solution), plan) == DONE
    assert next_reply("<user>something else entirely", plan) == UNKNOWN
    # a command shown before the instruction (a worked example) does not count as a step taken
    early = f"<sys>{render_command(solution[0])}\n" + _conversation(task.instruction, [])
    assert next_reply(early, plan) == render_command(solution[0])


def test_the_longest_instruction_wins_and_ids_end_with_the_end_of_turn():
    short, long = replace(load_tasks("builtin:wide:test")[0], instruction="Delete a.txt."), \
        replace(load_tasks("builtin:wide:test")[1], instruction="Delete a.txt. Then copy b.txt to c.txt.")
    plan = reference_plan([short, long], "bash")
    assert next_reply(_conversation(long.instruction, []), plan) == render_command(long.reference_solution[0])
    script = reference_script(CharRenderer(), [short], "bash")
    ids = script(CharRenderer().encode(_conversation(short.instruction, [])))
    assert ids[-1] == 0 and CharRenderer().decode(ids[:-1]) == render_command(short.reference_solution[0])


def test_refusals():
    task = load_tasks("builtin:lookup:test")[0]
    with pytest.raises(ReferencePolicyError, match="tool-format bash_examples"):
        reference_plan([task], "hermes")
    with pytest.raises(ReferencePolicyError, match="no reference solution"):
        reference_plan([replace(task, reference_solution=())], "bash")
    with pytest.raises(ReferencePolicyError, match="cannot tell them apart"):
        reference_plan([task, replace(task, id="x", reference_solution=("true",))], "bash")


def test_demos_through_the_builtin_agent_pass_and_feed_sft(tmp_path):
    from harnessrl.sft.data import rejection_trees
    from harnessrl.sft.demos import collect_demos
    from harnessrl.store import RunStore

    tasks = [load_tasks("builtin:lookup:train")[0], load_tasks("builtin:lookup:long")[1],
             load_tasks("builtin:jobs:train")[0]]
    cfg = load_config(None, ["render.tool_format=bash_examples", "sandbox.type=local", "loop.concurrency=3"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the local sandbox warns that it does not isolate
        result = collect_demos(cfg, tasks, ["builtin"], tmp_path / "demos", progress=False)
    assert (result.rollouts, result.passed, result.failed_tasks) == (3, 3, []), result
    with RunStore(tmp_path / "demos") as store:
        records = {r.task_id: r for r in store.list_rollouts()}
        for t in tasks:  # one call per command, one to finish
            assert records[t.id].call_count == len(t.reference_solution) + 1, (t.id, records[t.id])
        data = rejection_trees(store)
        calls = store.list_calls(as_arrays=True)
    assert data.rollouts == 3 and data.sampled_tokens > 0
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.render.renderer import Renderer

    renderer = Renderer.from_pretrained(smollm2_tokenizer_dir())
    sampled = {renderer.decode(list(c.sampled_ids)).replace(renderer.eot_text, "").strip() for c in calls}
    assert {render_command(c) for t in tasks for c in t.reference_solution} | {DONE} == sampled


def test_the_demos_command(tmp_path):
    import json

    from typer.testing import CliRunner

    from harnessrl.app.main import app

    args = ["demos", "-t", "builtin:lookup:test", "--limit", "1", "-H", "builtin", "--sandbox", "local",
            "-d", str(tmp_path / "d")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = CliRunner().invoke(app, args + ["--tool-format", "bash_examples", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert (out["rollouts"], out["passed"], out["failed_tasks"]) == (1, 1, [])
    res = CliRunner().invoke(app, args[:-2] + ["-d", str(tmp_path / "e"), "--tool-format", "hermes"])
    assert res.exit_code == 2 and "tool-format bash_examples" in res.output
