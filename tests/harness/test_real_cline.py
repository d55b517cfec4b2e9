"""Cline 3.0.65 (npm `cline`, no adapter of its own) as a `command:` harness, driven by the REAL
SmolLM2-135M-Instruct (HF engine, near-greedy) through `harnessrl rollout` in bwrap, in the
`bash_examples` tool format: the model's ```bash block must become a call of Cline's
`run_commands{commands: [...]}` (a list of whole command strings), which Cline runs in the empty
workspace, and the verifier must see the file. Once as the detector finds the tool, once with the
explicit `shell_tool=` override (docs/harnesses.md, "Cline")."""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.harness, pytest.mark.model, pytest.mark.bwrap, pytest.mark.timeout(1200)]
INSTRUCTION = "Create the file hello.txt that contains the word hello. Run this command: echo hello > hello.txt"


def cline_spec(options: str = "") -> str:
    from harnessrl.harness.install import harness_dir

    c = harness_dir("cline")
    bin_ = c / "node_modules" / ".bin" / "cline"
    return (f"command[ro={c},rw=.cline,name=cline{options}]:{bin_} auth -p openai -k \"$OPENAI_API_KEY\" "
            f"-b \"$OPENAI_BASE_URL\" -m \"$HARNESSRL_MODEL\" >/dev/null && {bin_} -P openai -m \"$HARNESSRL_MODEL\" {{task}}")


@pytest.fixture
def hello_task(tmp_path):
    d = tmp_path / "tasks" / "hello"
    (d / "workspace").mkdir(parents=True)
    (d / "workspace" / ".keep").write_text("")
    (d / "task.toml").write_text(f'id = "hello"\ninstruction = "{INSTRUCTION}"\n')
    (d / "verify.py").write_text("import json, os\ntext = open('hello.txt').read() if os.path.exists('hello.txt') else ''\n"
                                 "print(json.dumps({'hello': float('hello' in text.lower())}))\n")
    return d.parent


@pytest.mark.parametrize("options", ["", ",shell_tool=run_commands:commands:list"], ids=["detected", "override"])
def test_small_model_runs_a_command_through_cline_run_commands(options, hello_task, kit, tmp_path):
    from typer.testing import CliRunner

    from harnessrl.app.main import app
    from harnessrl.store import RunStore

    kit.require_installed("cline")  # installs it into the cache, as `harnessrl harness install cline` does
    run_dir = tmp_path / "run"
    res = CliRunner().invoke(app, ["rollout", "-t", str(hello_task), "-n", "1", "--tool-format", "bash_examples",
                                   "--engine", "hf", "--max-turns", "4", "--max-tokens", "64",
                                   "--default-temperature", "0.01", "--run-dir", str(run_dir), "-H", cline_spec(options)])
    assert res.exit_code == 0, res.output
    with RunStore(run_dir) as store:
        [record] = store.list_rollouts()
        calls = sorted(store.list_calls([record.rollout_id], include_raw=True), key=lambda c: c.seq)
    served = [c for c in calls if c.status == "ok"]
    assert served, (record.status, record.error)
    for c in served:
        assert 0 < len(c.sampled_ids) <= 64 and len(c.logprobs) == len(c.sampled_ids)
    names = [tc["function"]["name"] for c in served for tc in (c.response["choices"][0]["message"].get("tool_calls") or [])]
    args = [json.loads(tc["function"]["arguments"]) for c in served
            for tc in (c.response["choices"][0]["message"].get("tool_calls") or [])]
    assert names and set(names) == {"run_commands"}, names
    assert all(isinstance(a["commands"], list) and len(a["commands"]) == 1 for a in args), args
    # the workspace started empty: the verifier passes only if Cline ran the model's command
    assert record.status == "ok" and record.reward == 1.0, (record.status, record.reward, args)
