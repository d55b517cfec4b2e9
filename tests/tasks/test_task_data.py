"""Task data from untrusted directories (issue 20, holes 3 and 8): the loader reads regular files
only (no symlink, wherever it points, no fifo/socket/device), within size limits checked before
reading, refuses text that is not UTF-8 with the byte offset, and accepts an input_mount_dir only
under the workspace roots; `harnessrl tasks` reports each refusal as one line, not a traceback."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harnessrl.tasks import TaskError, load_task_dir, load_tasks
from harnessrl.app.tasks import tasks_app
from harnessrl.tasks.files import MAX_FILE_BYTES, MAX_TASK_BYTES, TaskLimits
from harnessrl.tasks.model import DEFAULT_MOUNT, MOUNT_ROOTS, Task, TaskDataError, Verifier

from .test_formats import make_clawgym, make_native_equivalent


def _secret(tmp_path: Path) -> Path:
    """A host file outside every task directory (stands in for /etc/shadow)."""
    secret = tmp_path / "host" / "shadow"
    secret.parent.mkdir(exist_ok=True)
    secret.write_text("root:$6$secret-hash:19000:0:99999:7:::\n")
    return secret


def _refused(path: Path, *words: str) -> str:
    with pytest.raises(TaskDataError) as info:
        load_tasks(path)
    message = str(info.value)
    for word in words:
        assert word in message, message
    return message


# hole 3: symlinks and special files ----------------------------------------------------------------

def test_symlink_in_input_files_to_a_host_file_is_refused_and_named(tmp_path):
    d = make_clawgym(tmp_path / "tasks")
    (d / "input_files" / "x").symlink_to(_secret(tmp_path))
    message = _refused(d, "input_files/x", "symbolic link")
    assert "secret-hash" not in message


def test_symlinked_directory_in_input_files_is_refused_not_dropped(tmp_path):
    d = make_clawgym(tmp_path / "tasks")
    (d / "input_files" / "etc").symlink_to(_secret(tmp_path).parent, target_is_directory=True)
    _refused(d, "input_files/etc", "symbolic link")


def test_symlink_inside_the_task_directory_is_refused_too(tmp_path):
    d = make_clawgym(tmp_path / "tasks")
    (d / "input_files" / "copy.json").symlink_to("input/a.json")
    _refused(d, "input_files/copy.json", "symbolic link")


@pytest.mark.parametrize("link", ["reward/check.py", "reward", "input_files", "data_entry.json"])
def test_every_clawgym_part_refuses_symlinks(tmp_path, link):
    d = make_clawgym(tmp_path / "tasks")
    real = tmp_path / "elsewhere"
    (d / link).rename(real)
    (d / link).symlink_to(real, target_is_directory=real.is_dir())
    _refused(d, link, "symbolic link")


@pytest.mark.parametrize("link", ["workspace/input/a.json", "workspace", "verifier/check.py", "task.toml",
                                  "verify.py"])
def test_every_native_part_refuses_symlinks(tmp_path, link):
    d = make_native_equivalent(tmp_path / "tasks")
    (d / "verify.py").write_text("print('{}')\n")
    real = tmp_path / "elsewhere"
    (d / link).rename(real)
    (d / link).symlink_to(real, target_is_directory=real.is_dir())
    _refused(d, link, "symbolic link")


def test_symlinked_task_directory_in_a_collection_is_refused(tmp_path):
    outside = make_clawgym(tmp_path / "outside")
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "task_0001").symlink_to(outside, target_is_directory=True)
    _refused(tmp_path / "tasks", "task_0001", "symbolic link")


def test_fifo_in_input_files_is_refused_without_opening_it(tmp_path):
    d = make_clawgym(tmp_path / "tasks")
    os.mkfifo(d / "input_files" / "pipe")  # opening it for reading would block forever
    _refused(d, "input_files/pipe", "fifo")


def test_socket_in_reward_is_refused(tmp_path):
    d = make_clawgym(tmp_path / "t")
    sock_path = d / "reward" / "s"
    if len(os.fsencode(sock_path)) >= 100:
        pytest.skip("tmp_path too long for a unix socket name")
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(sock_path))
        _refused(d, "reward/s", "socket")


# hole 8a: size limits ------------------------------------------------------------------------------

def test_oversized_sparse_input_file_is_refused_by_its_size(tmp_path):
    d = make_clawgym(tmp_path / "tasks")
    big = d / "input_files" / "big.bin"
    big.touch()
    os.truncate(big, MAX_FILE_BYTES + 1)  # sparse: no disk used
    _refused(d, "input_files/big.bin", str(MAX_FILE_BYTES + 1), str(MAX_FILE_BYTES))


def test_total_task_data_is_bounded(tmp_path):
    d = make_clawgym(tmp_path / "tasks")
    for i in range(MAX_TASK_BYTES // MAX_FILE_BYTES + 1):
        part = d / "input_files" / f"part{i}.bin"
        part.touch()
        os.truncate(part, MAX_FILE_BYTES)
    _refused(d, "input_files/part", str(MAX_TASK_BYTES), "per task")


def test_limits_are_configurable_and_bound_files_and_count(tmp_path):
    d = make_clawgym(tmp_path / "tasks")
    assert load_tasks(d, limits=TaskLimits(max_file_bytes=1000))[0].files
    with pytest.raises(TaskDataError, match=r"data_entry.json: \d+ bytes, over the limit of 10 bytes"):
        load_tasks(d, limits=TaskLimits(max_file_bytes=10))
    with pytest.raises(TaskDataError, match="more than 2 files"):
        load_tasks(d, limits=TaskLimits(max_files=2))


def test_oversized_data_entry_is_refused_before_parsing(tmp_path):
    d = make_clawgym(tmp_path / "tasks")
    os.truncate(d / "data_entry.json", MAX_FILE_BYTES + 5)
    _refused(d, "data_entry.json", str(MAX_FILE_BYTES + 5))


def test_deep_directory_nesting_is_a_typed_error(tmp_path):
    d = make_clawgym(tmp_path / "tasks")
    deep = d / "input_files"
    for _ in range(TaskLimits().max_depth + 1):
        deep = deep / "d"
    deep.mkdir(parents=True)
    _refused(d, "input_files/d/d", "deep")


# hole 8b: text that is not UTF-8 ------------------------------------------------------------------

def test_invalid_utf8_in_data_entry_names_the_file_and_byte_offset(tmp_path):
    d = make_clawgym(tmp_path / "tasks")
    (d / "data_entry.json").write_bytes(b'{"task_id": "t\xff", "user_query": "q"}')
    with pytest.raises(TaskError, match=r"data_entry.json: not valid UTF-8 at byte 14"):
        load_task_dir(d)


def test_invalid_utf8_in_task_toml_names_the_file_and_byte_offset(tmp_path):
    d = make_native_equivalent(tmp_path / "tasks")
    (d / "task.toml").write_bytes(b'id = "x"\ninstruction = "\xc3("\n')
    with pytest.raises(TaskError, match=r"task.toml: not valid UTF-8 at byte 24"):
        load_task_dir(d)


@pytest.mark.parametrize("text", ["[" * 100_000, '{"task_id": ' + "1" * 5000 + "}"])
def test_hostile_json_in_data_entry_is_a_task_error(tmp_path, text):
    d = make_clawgym(tmp_path / "tasks")
    (d / "data_entry.json").write_text(text)
    with pytest.raises(TaskError, match="data_entry.json"):
        load_task_dir(d)


# hole 8c: input_mount_dir -------------------------------------------------------------------------

BAD_MOUNTS = ["/", "/proc", "/proc/self", "/sys/x", "/dev/shm", "/etc/ws", "/usr/local/ws", "/bin/w",
              "/lib/w", "/lib64/w", "/sbin/w", "/boot/w", "/run/w", "/var/w", "workspace", "./workspace",
              "/workspace/../etc", "/workspace/", "//workspace", "/workspace/./x", "/root", "/home",
              "/tmp", "/root/a b", "/root/x\n", 5, ["/workspace"]]
GOOD_MOUNTS = ["/workspace", "/workspace/sub", "/root/.openclaw/workspace", "/home/u/ws", "/mnt/task",
               "/data/ws", "/tmp/ws", "/srv/w-1_2"]


def _set_clawgym_mount(d: Path, value: object) -> None:
    entry = json.loads((d / "data_entry.json").read_text())
    entry["input_mount_dir"] = value
    (d / "data_entry.json").write_text(json.dumps(entry))


@pytest.mark.parametrize("mount", BAD_MOUNTS)
def test_bad_clawgym_input_mount_dir_is_refused_with_the_accepted_paths(tmp_path, mount):
    d = make_clawgym(tmp_path / "tasks")
    _set_clawgym_mount(d, mount)
    with pytest.raises(TaskError, match="input_mount_dir") as info:
        load_task_dir(d)
    assert "data_entry.json" in str(info.value)
    assert all(root in str(info.value) for root in MOUNT_ROOTS)


@pytest.mark.parametrize("mount", GOOD_MOUNTS)
def test_good_input_mount_dirs_are_accepted(tmp_path, mount):
    d = make_clawgym(tmp_path / "tasks")
    _set_clawgym_mount(d, mount)
    assert load_task_dir(d).input_mount_dir == mount


@pytest.mark.parametrize("mount", ["/", "/proc", "rel/path", "/root/../etc"])
def test_bad_native_input_mount_dir_is_refused(tmp_path, mount):
    d = make_native_equivalent(tmp_path / "tasks")
    text = (d / "task.toml").read_text().replace('"/root/.openclaw/workspace"', json.dumps(mount))
    (d / "task.toml").write_text(text)
    with pytest.raises(TaskError, match="task.toml.*input_mount_dir"):
        load_task_dir(d)


def test_a_task_built_in_code_is_held_to_the_same_mount_rule():
    verifier = Verifier(kind="checks", command="true")
    assert Task(id="t", instruction="i", files={}, verifier=verifier).input_mount_dir == DEFAULT_MOUNT
    with pytest.raises(TaskError, match="input_mount_dir"):
        Task(id="t", instruction="i", files={}, verifier=verifier, input_mount_dir="/proc")


# the CLI: one line with the fix, exit 2, no traceback ---------------------------------------------

@pytest.mark.parametrize("command", ["list", "validate"])
@pytest.mark.parametrize("breakage, words", [
    (lambda d, tmp: (d / "input_files" / "x").symlink_to(_secret(tmp)), ("input_files/x", "symbolic link")),
    (lambda d, tmp: (d / "data_entry.json").write_bytes(b'{"task_id": "\xff"}'),
     ("not valid UTF-8 at byte 13",)),
    (lambda d, tmp: _set_clawgym_mount(d, "/proc"), ("input_mount_dir", "/workspace")),
    (lambda d, tmp: os.truncate(d / "input_files" / "input" / "a.json", MAX_FILE_BYTES + 1),
     ("a.json", str(MAX_FILE_BYTES + 1))),
])
def test_cli_reports_task_data_refusals_as_one_line(tmp_path, command, breakage, words):
    d = make_clawgym(tmp_path / "tasks")
    breakage(d, tmp_path)
    args = [command, str(d)] + (["--sandbox", "local"] if command == "validate" else [])
    result = CliRunner().invoke(tasks_app, args)
    assert result.exit_code == 2, (result.output, result.exception)
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output and "secret-hash" not in result.output
    assert result.output.startswith("error: ")
    for word in words:
        assert word in result.output, result.output
