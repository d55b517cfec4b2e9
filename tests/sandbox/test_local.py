"""The local backend (no isolation) and the backend-independent parts of the interface."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from harnessrl.sandbox import (
    ProxyEndpoint,
    SandboxClosed,
    SandboxConfig,
    SandboxError,
    make_sandbox,
)
from harnessrl.sandbox.local import SandboxNotIsolatedWarning

pytestmark = pytest.mark.filterwarnings("ignore::harnessrl.sandbox.local.SandboxNotIsolatedWarning")


@pytest.fixture
def task_dir(tmp_path: Path) -> Path:
    src = tmp_path / "task"
    (src / "data").mkdir(parents=True)
    (src / "data" / "a.txt").write_text("alpha\n")
    (src / "notes.md").write_text("# notes\n")
    return src


@pytest.fixture
def sb(task_dir: Path):
    with make_sandbox(SandboxConfig(type="local"), workspace_src=task_dir) as box:
        yield box


def test_warns_that_local_does_not_isolate(task_dir: Path) -> None:
    with pytest.warns(SandboxNotIsolatedWarning, match="does NOT isolate"):
        make_sandbox(SandboxConfig(type="local")).destroy()


def test_workspace_is_filled_and_is_cwd(sb) -> None:
    res = sb.run(["sh", "-c", "pwd; cat data/a.txt"])
    assert res.ok, res
    assert res.stdout.splitlines() == [sb.inner_workspace, "alpha"]
    assert (sb.workspace / "notes.md").read_text() == "# notes\n"


def test_env_is_clean_and_extendable(monkeypatch) -> None:
    monkeypatch.setenv("HRL_HOST_ONLY", "leak")
    monkeypatch.setenv("HRL_PASS", "yes")
    cfg = SandboxConfig(type="local", env={"A": "1"}, env_passthrough=["HRL_PASS"])
    with make_sandbox(cfg) as box:
        out = box.run(["env"], env={"B": "2"}).stdout
    env = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    assert "HRL_HOST_ONLY" not in env
    assert (env["A"], env["B"], env["HRL_PASS"]) == ("1", "2", "yes")
    assert env["HOME"] != os.environ.get("HOME")


def test_python_on_path(sb) -> None:
    res = sb.run(["python", "-c", "import sys; print(sys.prefix)"])
    assert res.ok and res.stdout.strip() == sys.prefix


def test_stdin_cwd_and_exit_code(sb) -> None:
    res = sb.run(["sh", "-c", "cat; pwd; exit 3"], stdin="from stdin\n", cwd="data")
    assert res.returncode == 3 and not res.ok and not res.timed_out
    assert res.stdout.splitlines() == ["from stdin", str(Path(sb.inner_workspace) / "data")]


def test_missing_program_is_a_result(sb) -> None:
    res = sb.run(["definitely-not-a-program-xyz"])
    assert res.returncode == 127 and not res.ok


def test_stdout_path_and_output_tail(tmp_path: Path) -> None:
    with make_sandbox(SandboxConfig(type="local", max_output_bytes=10)) as box:
        res = box.run(["sh", "-c", "echo 0123456789abcdef"])
        assert res.stdout == "789abcdef\n"
        out = tmp_path / "out.txt"
        res = box.run(["sh", "-c", "echo to-file"], stdout_path=out)
        assert res.stdout == "" and out.read_text() == "to-file\n"


def _alive(marker: str) -> bool:
    return subprocess.run(["pgrep", "-f", marker], check=False, capture_output=True).returncode == 0


def test_timeout_kills_the_process_tree(sb) -> None:
    marker = f"{time.time_ns() % 10**9}"
    res = sb.run(["sh", "-c", f"sleep 1000.{marker} & sleep 1001.{marker}"], timeout_s=0.5)
    assert res.timed_out and not res.ok
    deadline = time.monotonic() + 10
    while _alive(f"sleep 100[01].{marker}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(f"sleep 100[01].{marker}")


def test_wall_time_is_the_default_timeout() -> None:
    with make_sandbox(SandboxConfig(type="local", wall_time_s=0.3)) as box:
        assert box.run(["sleep", "30"]).timed_out


def test_copy_in_and_out(sb, tmp_path: Path) -> None:
    reward = tmp_path / "reward"
    reward.mkdir()
    (reward / "check.py").write_text("print(1)\n")
    sb.copy_in(reward, "reward")
    sb.copy_in(reward / "check.py", "deep/er/c.py")
    assert sb.run(["python", "reward/check.py"]).stdout == "1\n"
    assert sb.run(["cat", "deep/er/c.py"]).stdout == "print(1)\n"
    sb.copy_out("data", tmp_path / "data_out")
    sb.copy_out("notes.md", tmp_path / "x" / "n.md")
    assert (tmp_path / "data_out" / "a.txt").read_text() == "alpha\n"
    assert (tmp_path / "x" / "n.md").read_text() == "# notes\n"
    with pytest.raises(SandboxError):
        sb.copy_in(tmp_path / "missing", "m")


def test_proxy_base_is_the_host_address() -> None:
    with make_sandbox(SandboxConfig(type="local"), proxy=ProxyEndpoint(port=4321)) as box:
        assert box.proxy_base == "http://127.0.0.1:4321"
    with make_sandbox(SandboxConfig(type="local")) as box:
        assert box.proxy_base is None


def test_destroy_is_idempotent_and_final(task_dir: Path) -> None:
    box = make_sandbox(SandboxConfig(type="local"), workspace_src=task_dir)
    ws = box.workspace
    box.destroy()
    box.destroy()
    assert not ws.exists()
    with pytest.raises(SandboxClosed):
        box.run(["true"])


def test_docker_is_not_a_sandbox_type() -> None:
    """The docker backend only raised; it is gone until it is real, and the config says so."""
    with pytest.raises(ValidationError, match="'bwrap' or 'local'"):
        SandboxConfig(type="docker")


@pytest.mark.parametrize(
    "bad",
    [
        {"type": "podman"},
        {"workspace_mount": "relative/ws"},
        {"home": "/a/../b"},
        {"memory_mb": 0},
        {"extra_ro_binds": ["rel/path"]},
        {"unknown_field": 1},
    ],
)
def test_config_rejects_bad_values(bad: dict) -> None:
    with pytest.raises(ValidationError):
        SandboxConfig(**bad)


def test_workspace_src_must_be_a_directory(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="not a directory"):
        make_sandbox(SandboxConfig(type="local"), workspace_src=tmp_path / "nope")


def test_background_jobs_end_with_the_run_unless_kept(sb) -> None:
    marker = f"{time.time_ns() % 10**9}"
    assert sb.run(["sh", "-c", f"sleep 1002.{marker} &"]).ok
    deadline = time.monotonic() + 10
    while _alive(f"sleep 1002.{marker}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(f"sleep 1002.{marker}")
    assert sb.run(["sh", "-c", f"sleep 1003.{marker} &"], keep_background=True).ok
    assert _alive(f"sleep 1003.{marker}")
    sb.destroy()
    deadline = time.monotonic() + 10
    while _alive(f"sleep 1003.{marker}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(f"sleep 1003.{marker}")


def test_fixed_private_paths_are_the_same_for_every_sandbox(task_dir: Path, tmp_path: Path) -> None:
    """Issue 11: where a private mount namespace is available, workspace/HOME/TMPDIR are at fixed
    paths (identical prompts across rollouts), each run seeing only its own sandbox's files."""
    from harnessrl.sandbox.local import fixed_base, private_mounts_argv

    if private_mounts_argv() is None:
        pytest.skip("no private mount namespace here (unshare refused): the documented fallback")
    with make_sandbox(SandboxConfig(type="local"), workspace_src=task_dir) as a, \
            make_sandbox(SandboxConfig(type="local")) as b:
        assert a.fixed_paths and b.fixed_paths
        assert a.inner_workspace == b.inner_workspace == str(fixed_base() / "workspace")
        assert a.workspace != b.workspace  # different host directories behind the same path
        script = 'pwd; echo "$HOME $TMPDIR"; echo mine > "$HOME/h"; echo t > "$TMPDIR/t"; ls'
        ra, rb = a.run(["sh", "-c", script]), b.run(["sh", "-c", script])
        assert ra.ok and rb.ok, (ra, rb)
        base = fixed_base()
        assert ra.stdout.splitlines()[:2] == rb.stdout.splitlines()[:2] == [
            str(base / "workspace"), f"{base / 'home'} {base / 'tmp'}"]
        assert "notes.md" in ra.stdout and "notes.md" not in rb.stdout  # each sees its own files
        assert [list((base / d).iterdir()) for d in ("workspace", "home", "tmp")] == [[], [], []]  # host side
        (tmp_path / "in.txt").write_text("x")
        a.copy_in(tmp_path / "in.txt", "in.txt")
        assert a.run(["cat", "in.txt"]).stdout == "x"
        a.copy_out("notes.md", tmp_path / "out.md")
        assert (tmp_path / "out.md").read_text() == "# notes\n"
        assert a.run(["cat", "h"], cwd=str(base / "home")).stdout == "mine\n"
