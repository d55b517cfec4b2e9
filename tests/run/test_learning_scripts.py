"""benchmarks/learning scripts: fork_baseline.py (a new run keeps only the source run's step 0, and a
config that changes what the baseline depends on is refused) and first_commands.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessrl.config import load_config
from harnessrl.store import RunStore
from harnessrl.store.records import RolloutRecord
from tests.modules import load_file

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs/learning_harnesses.yaml"


def _module():
    return load_file("fork_baseline", ROOT / "benchmarks/learning/fork_baseline.py")


def _source(path: Path, cfg: dict) -> None:
    with RunStore(path) as store:
        store.set_meta("config", cfg)
        for step in (0, 1):
            store.put_step(step, {"step": step})
            store.put_rollout(RolloutRecord(rollout_id=f"r{step}", task_id="t", harness="builtin",
                                            group_id=f"g{step}", status="ok", reward=1.0, step=step,
                                            sample_idx=0, category="c", split="test"))


def test_fork_keeps_step_0_only(tmp_path):
    fork = _module()
    cfg = load_config(CONFIG).model_dump(mode="json")
    _source(tmp_path / "src", cfg)
    new = load_config(CONFIG, ["algorithm.reward=score", "optimizer.lr=1e-4", "loop.steps=3"]).model_dump(mode="json")
    fork.fork(tmp_path / "src", tmp_path / "dest", new)
    with RunStore(tmp_path / "dest") as store:
        assert [s for s, _ in store.list_steps()] == [0]
        assert [r.rollout_id for r in store.list_rollouts()] == ["r0"]
    with RunStore(tmp_path / "src") as store:  # the source is untouched
        assert [s for s, _ in store.list_steps()] == [0, 1]


def test_fork_refuses_a_config_with_another_baseline(tmp_path):
    fork = _module()
    cfg = load_config(CONFIG).model_dump(mode="json")
    _source(tmp_path / "src", cfg)
    new = load_config(CONFIG, ["loop.eval_samples=4"]).model_dump(mode="json")
    with pytest.raises(SystemExit, match="eval_samples"):
        fork.fork(tmp_path / "src", tmp_path / "dest", new)
    assert not (tmp_path / "dest").exists()


def test_first_command_is_the_first_word_of_the_first_bash_block():
    fc = load_file("first_commands", ROOT / "benchmarks/learning/first_commands.py").first_command
    assert fc("```bash\ntouch digest.txt\n```") == "touch"
    assert fc("I will do it.\n```\n  echo hi > a.txt\n```\n```bash\nrm x\n```") == "echo"
    assert fc("Done.") == "(no command)"
