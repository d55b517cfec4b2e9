"""An image task from the CLI alone: the shipped Harbor example (examples/image-task: an OCI layout
built with umoci from busybox-static and bash by its build_image.sh) through real Claude Code and
Codex in bwrap, with `harnessrl rollout` (scripted engine) and `harnessrl eval` (the real
SmolLM2-135M-Instruct, near-greedy). The test script gives 0.5 when it runs on the image's own root
(the image's /app/README.txt and busybox present, the host's dpkg database absent) and 0.5 more for
hello.txt holding hello, so a reward of 0.5 or more shows that the verifier ran on the image."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.harness, pytest.mark.bwrap, pytest.mark.timeout(900)]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "image-task"
HARNESSES = ("claude-code:small", "codex:small")
HOST_ONLY = "/var/lib/dpkg/status"  # on the Debian host, never in the image
ON_IMAGE_SH = f"""#!/bin/bash
on_image=0
if [ -f /app/README.txt ] && [ -x /bin/busybox ] && [ ! -e {HOST_ONLY} ]; then on_image=1; fi
solved=0
if [ "$(tr -d '[:space:]' < /app/hello.txt 2>/dev/null)" = hello ]; then solved=1; fi
echo "on_image=$on_image solved=$solved"
awk -v a=$on_image -v b=$solved 'BEGIN {{ print a / 2 + b / 2 }}' > /logs/verifier/reward.txt
"""


@pytest.fixture(scope="module")
def image_task(tmp_path_factory) -> Path:
    missing = [t for t in ("umoci", "skopeo", "busybox", "bash") if shutil.which(t) is None]
    if missing:
        pytest.skip(f"image tasks need {', '.join(missing)} (apt-get install umoci skopeo busybox-static)")
    assert subprocess.run(["test", "-e", HOST_ONLY]).returncode == 0, "the host check needs a Debian host"
    task = tmp_path_factory.mktemp("image-task") / "hello"
    shutil.copytree(EXAMPLE / "hello", task, ignore=shutil.ignore_patterns("image"))
    res = subprocess.run([str(EXAMPLE / "build_image.sh"), str(task / "environment" / "image")],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    (task / "tests" / "test.sh").write_text(ON_IMAGE_SH)
    return task


def run_cli(args: list[str]) -> None:
    from typer.testing import CliRunner

    from harnessrl.app.main import app

    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output


def stored(run_dir: Path) -> dict[str, tuple]:
    """harness -> (record, its calls in order)."""
    from harnessrl.store import RunStore

    with RunStore(run_dir) as store:
        records = store.list_rollouts()
        calls = store.list_calls([r.rollout_id for r in records])
    return {r.harness: (r, sorted((c for c in calls if c.rollout_id == r.rollout_id), key=lambda c: c.seq))
            for r in records}


def check_recorded(run_dir: Path) -> dict[str, tuple]:
    got = stored(run_dir)
    assert sorted(got) == sorted(HARNESSES)
    for harness, (record, calls) in got.items():
        served = [c for c in calls if c.status == "ok"]
        assert record.status == "ok", (harness, record.status, record.error)
        assert record.call_count == len(calls) and served, (harness, record.call_count, len(calls))
        assert all(len(c.prompt_ids) > 0 and len(c.sampled_ids) > 0 for c in served), harness
        assert record.reward is not None and record.reward >= 0.5, (harness, record.reward)  # ran on the image
    return got


@pytest.fixture(scope="module", autouse=True)
def harnesses_installed(kit):
    for name in ("claude-code", "codex"):
        kit.require_installed(name)


def test_image_task_through_claude_code_and_codex_with_the_scripted_engine(image_task, tmp_path):
    run_dir = tmp_path / "run"
    args = ["rollout", "-t", str(image_task), "-n", "1", "--engine", "scripted", "--max-turns", "2",
            "--run-dir", str(run_dir)]
    for harness in HARNESSES:
        args += ["-H", harness]
    run_cli(args)
    for harness, (record, _) in check_recorded(run_dir).items():
        assert record.reward == 0.5, (harness, record.reward)  # the fixed reply writes no hello.txt


@pytest.mark.model
def test_image_task_through_claude_code_and_codex_with_the_real_model(image_task, tmp_path):
    run_dir = tmp_path / "eval"
    args = ["eval", "-t", str(image_task), "-n", "1", "--engine", "hf", "--tool-format", "bash_examples",
            "--max-turns", "3", "--max-tokens", "96", "--default-temperature", "0.01", "--json",
            "--run-dir", str(run_dir)]
    for harness in HARNESSES:
        args += ["-H", harness]
    run_cli(args)
    check_recorded(run_dir)
