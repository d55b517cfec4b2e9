"""Host-side tree handling (sandbox/treeops.py): iterative removal and a bounded copy that keeps
hard links and holes; every limit raises WorkspaceLimitExceeded naming itself."""

from __future__ import annotations

import os
import sys

import pytest

from harnessrl.sandbox.base import WorkspaceLost
from harnessrl.sandbox.treeops import (
    HostCopyFailed,
    TreeLimits,
    WorkspaceLimitExceeded,
    copy_tree,
    remove_tree,
)


def deep_tree(root, depth: int, name: str = "d") -> None:
    """`depth` nested directories under root, made with relative paths (past PATH_MAX)."""
    root.mkdir()
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        with open(os.open("leaf", os.O_WRONLY | os.O_CREAT, 0o600, dir_fd=fd), "w") as f:
            f.write("x")
    finally:
        os.close(fd)


def test_remove_tree_deeper_than_the_recursion_limit_and_path_max(tmp_path):
    depth = sys.getrecursionlimit() + 500  # shutil.rmtree (3.11) raised RecursionError here
    deep_tree(tmp_path / "deep", depth, name="n" * 40)  # ~40 KiB of path: 10 x PATH_MAX
    assert remove_tree(tmp_path / "deep") == ""
    assert list(tmp_path.iterdir()) == []


def test_remove_tree_unreadable_and_read_only_dirs_files_and_links(tmp_path):
    root = tmp_path / "t"
    (root / "a/b").mkdir(parents=True)
    (root / "a/b/f").write_text("x")
    (root / "a/link").symlink_to(tmp_path)  # removed itself, never followed
    os.mkfifo(root / "fifo")
    (root / "a/b").chmod(0o500)
    (root / "a").chmod(0)
    assert remove_tree(root) == ""
    assert not root.exists() and tmp_path.is_dir()
    f = tmp_path / "file"
    f.write_text("x")
    assert remove_tree(f) == "" and not f.exists()
    assert remove_tree(tmp_path / "missing") == ""


def test_remove_tree_answers_instead_of_raising(tmp_path):
    deep_tree(tmp_path / "t", 50)
    why = remove_tree(tmp_path / "t", timeout_s=0)
    assert "not removed within" in why
    assert remove_tree(tmp_path / "t") == ""


def test_copy_keeps_hard_links_holes_and_links_and_drops_fifos(tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "big").write_bytes(os.urandom(1 << 20))
    for i in range(20):
        os.link(src / "big", src / "sub" / f"link{i}")
    with open(src / "sparse", "wb") as f:
        f.truncate(8 << 20)
        f.seek(4 << 20)
        f.write(b"data")
    (src / "sub/up").symlink_to("../big")
    os.mkfifo(src / "fifo")
    (src / "sub").chmod(0o555)
    budget = copy_tree(src, tmp_path / "dst")
    dst = tmp_path / "dst"
    assert os.stat(dst / "big").st_nlink == 21  # one inode, not 21 MiB
    assert os.stat(dst / "sub/link7").st_ino == os.stat(dst / "big").st_ino
    sparse = os.stat(dst / "sparse")
    assert sparse.st_size == 8 << 20 and sparse.st_blocks * 512 < 1 << 20  # holes stay holes
    assert (dst / "sparse").read_bytes()[4 << 20:(4 << 20) + 4] == b"data"
    assert os.readlink(dst / "sub/up") == "../big" and not (dst / "fifo").exists()
    assert budget.entries == 25 and budget.bytes == (1 << 20) + (8 << 20) + 4096
    assert remove_tree(dst) == "" and remove_tree(src) == ""


@pytest.mark.parametrize("limit, make, limits", [
    ("entries", lambda d: [(d / f"f{i}").touch() for i in range(30)], TreeLimits(max_entries=20)),
    ("depth", lambda d: (d / "/".join("d" * 10)).mkdir(parents=True), TreeLimits(max_depth=5)),
    ("path", lambda d: (d / ("n" * 200)).mkdir(), TreeLimits(max_path_bytes=100)),
    ("bytes", lambda d: os.truncate(d.joinpath("s").touch() or d / "s", 64 << 20), TreeLimits(max_bytes=1 << 20)),
    ("time", lambda d: [(d / f"f{i}").touch() for i in range(600)], TreeLimits(deadline_s=0)),
])
def test_each_limit_raises_a_typed_error_naming_it(tmp_path, limit, make, limits):
    src = tmp_path / "src"
    src.mkdir()
    make(src)
    with pytest.raises(WorkspaceLimitExceeded) as err:
        copy_tree(src, tmp_path / "dst", limits)
    assert err.value.limit == limit and isinstance(err.value, WorkspaceLost)
    assert f"workspace limit ({limit})" in str(err.value)


def test_hard_links_count_as_entries_not_again_as_bytes(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_bytes(b"x" * 1000)
    for i in range(9):
        os.link(src / "f", src / f"l{i}")
    budget = copy_tree(src, tmp_path / "dst", TreeLimits(max_bytes=1500))
    assert (budget.entries, budget.bytes) == (10, 1000)
    with pytest.raises(WorkspaceLimitExceeded, match="entries"):
        copy_tree(src, tmp_path / "dst2", TreeLimits(max_entries=5))


def test_a_host_side_failure_is_not_the_workspaces(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("x")
    blocker = tmp_path / "dst"
    blocker.write_text("a file where the destination dir should be")
    with pytest.raises(HostCopyFailed) as err:
        copy_tree(src, blocker)
    assert not isinstance(err.value, WorkspaceLost)


def test_the_sweep_removes_dead_owners_dirs_and_skips_what_it_cannot(tmp_path):
    """A dead owner's deep tree is removed; one that cannot be removed is renamed stale, named,
    and left alone by later sweeps; a sweep out of time leaves the rest for the next one."""
    import subprocess

    from harnessrl.sandbox.treeops import UNFINISHED, sweep_dead_owners

    child = subprocess.Popen(["true"])
    child.wait()
    deep_tree(tmp_path / f"sbx-{child.pid}-deep", 1500)
    (tmp_path / f"sbx-{os.getpid()}-mine").mkdir()  # a live owner's: never touched
    assert sweep_dead_owners(tmp_path, "sbx-", "sbx-stale-") == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"sbx-{os.getpid()}-mine"]

    deep_tree(tmp_path / f"sbx-{child.pid}-slow", 20)
    problems = sweep_dead_owners(tmp_path, "sbx-", "sbx-stale-", remove=lambda p, **kw: remove_tree(p, timeout_s=0))
    assert len(problems) == 1 and UNFINISHED in problems[0] and (tmp_path / f"sbx-{child.pid}-slow").exists()
    (tmp_path / f"sbx-{child.pid}-stuck").mkdir()
    calls = []

    def refuse(path, **kw):
        calls.append(path)
        return f"{path}: Operation not permitted" if "stuck" in str(path) else remove_tree(path, **kw)

    problems = sweep_dead_owners(tmp_path, "sbx-", "sbx-stale-", remove=refuse)
    assert len(problems) == 1 and not (tmp_path / f"sbx-{child.pid}-slow").exists()
    assert "Operation not permitted" in problems[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"sbx-{os.getpid()}-mine", f"sbx-stale-{child.pid}-stuck"]
    calls.clear()
    assert sweep_dead_owners(tmp_path, "sbx-", "sbx-stale-", remove=refuse) == [] and calls == []


def test_a_dir_another_sweep_removed_meanwhile_is_no_problem(tmp_path, caplog):
    """Two processes sweep the same /tmp: the one that finds a dir gone under it (ENOENT part way)
    reports nothing and renames nothing."""
    import shutil
    import subprocess

    from harnessrl.sandbox.treeops import sweep_dead_owners

    child = subprocess.Popen(["true"])
    child.wait()
    (tmp_path / f"sbx-{child.pid}-raced" / "a").mkdir(parents=True)

    def other_sweep_wins(path, **kw):
        shutil.rmtree(path)
        return f"{path}: No such file or directory (at depth 2)"

    assert sweep_dead_owners(tmp_path, "sbx-", "sbx-stale-", remove=other_sweep_wins) == []
    assert list(tmp_path.iterdir()) == [] and "stale scratch dir" not in caplog.text
