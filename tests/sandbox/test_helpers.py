"""Pure helpers of the sandbox backends (no bubblewrap needed)."""

from __future__ import annotations

import io
import os
import sys
import tarfile
from pathlib import Path

import pytest

from harnessrl.sandbox.base import SandboxConfig
from harnessrl.sandbox.bwrap_enter import entry_argv
from harnessrl.sandbox.bwrap_mounts import bwrap_argv, identity_files, python_prefixes
from harnessrl.sandbox.process import run_to_completion
from harnessrl.sandbox.tarcopy import safe_members

REPO = Path(__file__).resolve().parents[2]


def _tar(entries: list[tarfile.TarInfo]) -> tarfile.TarFile:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for e in entries:
            t.addfile(e, io.BytesIO(b"x" * e.size) if e.isfile() else None)
    buf.seek(0)
    return tarfile.open(fileobj=buf)


def _entry(name: str, kind: bytes = tarfile.REGTYPE, link: str = "", mode: int = 0o644) -> tarfile.TarInfo:
    e = tarfile.TarInfo(name)
    e.type, e.linkname, e.mode = kind, link, mode
    e.size = 1 if kind == tarfile.REGTYPE else 0
    return e


def test_safe_members_skip_escapes_and_devices():
    tar = _tar(
        [
            _entry("./ok.txt"),
            _entry("dir/", tarfile.DIRTYPE),
            _entry("dir/in.txt", mode=0o4755),
            _entry("/abs.txt"),
            _entry("../up.txt"),
            _entry("dir/../../up2.txt"),
            _entry("rel-link", tarfile.SYMTYPE, "dir/in.txt"),
            _entry("dir/up-link", tarfile.SYMTYPE, "../ok.txt"),
            _entry("abs-link", tarfile.SYMTYPE, "/etc/passwd"),
            _entry("out-link", tarfile.SYMTYPE, "../../x"),
            _entry("hard-out", tarfile.LNKTYPE, "../x"),
            _entry("hard-ok", tarfile.LNKTYPE, "./ok.txt"),
            _entry("dev", tarfile.CHRTYPE),
            _entry("fifo", tarfile.FIFOTYPE),
        ]
    )
    kept = {m.name: m for m in safe_members(tar)}
    assert set(kept) == {"./ok.txt", "dir", "dir/in.txt", "rel-link", "dir/up-link", "hard-ok"}
    assert kept["dir/in.txt"].mode == 0o755  # setuid dropped


def test_safe_members_skip_link_chains_that_escape(tmp_path):
    """Each link's target alone stays inside, but resolved in order they lead out: a/sub -> ..,
    a/q -> sub/.. (= the destination's parent), then a file under a/q (issue 20, found in review)."""
    from harnessrl.sandbox.tarcopy import extract_safely

    entries = [_entry("a/", tarfile.DIRTYPE), _entry("a/sub", tarfile.SYMTYPE, ".."),
               _entry("a/q", tarfile.SYMTYPE, "sub/.."), _entry("a/q/pwned"), _entry("a/sub/also")]
    kept = {m.name for m in safe_members(_tar(entries))}
    # a/q leads out, so it is refused, and so is a/q/pwned: a path through a link name of the archive
    # is judged against the final tree as a whole (issue 39), never by the order its members come in
    assert kept == {"a", "a/sub"}
    dest = tmp_path / "dest"
    dest.mkdir()
    extract_safely(_tar(entries), dest)
    assert not (tmp_path / "pwned").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["dest"]
    assert not (dest / "a/q").exists() and not (dest / "a/q").is_symlink()


def _steps(argv):
    return [a for a in argv if a.startswith("--")]


def test_entry_argv_orders_the_steps(tmp_path):
    fds = {"user": 3, "mnt": 4, "uts": 5, "ipc": 6, "net": 7, "pid": 8, "cgroup": 9, "root": 10}
    bpf = tmp_path / "f.bpf"
    # host root, sandbox uid 0 (no nested user ns): become the unprivileged uid FIRST, then the user ns
    argv = entry_argv(fds, seccomp_bpf=bpf, host_uid=65534)
    assert "nsenter" not in argv and "setpriv" not in argv
    assert argv[argv.index("--become") + 1] == "65534:65534"
    assert _steps(argv) == ["--seccomp", "--become", "--userns", *["--setns"] * 6, "--root", "--drop-caps",
                            "--fork", "--"]
    assert argv[argv.index("--userns") + 1] == "3" and argv[argv.index("--root") + 1] == "10"
    assert argv[argv.index("--seccomp") + 1] == str(bpf)
    # nested (sandbox uid != 0): the outer user ns before the others, the sandbox user's after the root
    argv = entry_argv({**fds, "outer_user": 11}, seccomp_bpf=None)
    assert "--seccomp" not in argv and "--become" not in argv
    assert _steps(argv) == ["--userns", *["--setns"] * 6, "--root", "--userns", "--drop-caps", "--fork", "--"]
    users = [argv[i + 1] for i, a in enumerate(argv) if a == "--userns"]
    assert users == ["11", "3"]


def test_bwrap_argv_binds_no_checkout_or_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESSRL_CACHE", str(tmp_path))
    cfg = SandboxConfig(workspace_mount="/root/.openclaw/workspace", home="/root", workspace_mb=64)
    argv = bwrap_argv(cfg, info_fd=5, block_fd=6, init=["cat"])
    binds = [argv[i + 1] for i, a in enumerate(argv) if a in ("--bind", "--ro-bind", "--dev-bind")]
    assert "--bind" not in argv and "--dev-bind" not in argv  # nothing writable from the host
    assert str(REPO) not in binds and str(Path.home()) not in binds and "/" not in binds
    assert all(not b.startswith(str(REPO)) or b.startswith(str(REPO / ".venv")) for b in binds)
    for flag in ("--unshare-all", "--unshare-user", "--new-session", "--remount-ro"):
        assert flag in argv
    i = argv.index(cfg.workspace_mount)
    assert argv[i - 1] == "--tmpfs" and argv[i - 2] == str(64 << 20)
    etc = Path(argv[argv.index("/etc") - 1])
    assert (etc / "passwd").read_text().startswith("root:x:0:0")
    assert not (etc / "shadow").exists() and not (etc / "ssl" / "private").exists()


def test_identity_files_name_the_sandbox_user():
    files = identity_files(SandboxConfig(uid=1234, home="/home/agent"))
    assert "sandbox:x:1234:1234:sandbox:/home/agent:/bin/bash" in files["passwd"]
    assert "root:x:0:0" in identity_files(SandboxConfig(uid=0))["passwd"]


def test_python_prefixes_are_the_interpreter_dirs_only():
    prefixes = python_prefixes()
    assert all(not p.startswith("/usr") for p in prefixes)
    if sys.prefix != sys.base_prefix:
        assert str(Path(sys.prefix).resolve()) in prefixes
    assert str(REPO) not in prefixes


def test_run_to_completion_tail_and_timeout(tmp_path):
    env = {"PATH": "/usr/bin:/bin"}
    res = run_to_completion(
        ["sh", "-c", "echo 0123456789; echo err >&2; exit 4"],
        env=env,
        cwd=str(tmp_path),
        timeout_s=30,
        max_output_bytes=4,
    )
    assert (res.returncode, res.stdout, res.stderr, res.timed_out) == (4, "789\n", "err\n", False)
    res = run_to_completion(["sleep", "30"], env=env, cwd=str(tmp_path), timeout_s=0.2)
    assert res.timed_out and res.returncode < 0


@pytest.mark.parametrize("stdin", [b"bytes in", "text in"])
def test_run_to_completion_stdin(tmp_path, stdin):
    res = run_to_completion(
        ["cat"], env={"PATH": "/usr/bin:/bin"}, cwd=str(tmp_path), timeout_s=30, stdin=stdin
    )
    assert res.stdout == "bytes in" if isinstance(stdin, bytes) else res.stdout == "text in"


def test_missing_extra_bind_is_a_sandbox_error(tmp_path, monkeypatch):
    from harnessrl.sandbox.base import SandboxError

    monkeypatch.setenv("HARNESSRL_CACHE", str(tmp_path))
    cfg = SandboxConfig(extra_ro_binds=[str(tmp_path / "nope")])
    with pytest.raises(SandboxError, match="does not exist"):
        bwrap_argv(cfg, info_fd=5, block_fd=6, init=["cat"])


def test_bwrap_missing_is_unavailable_with_the_fix(monkeypatch):
    import shutil

    from harnessrl.sandbox import SandboxUnavailable, make_sandbox

    real_which = shutil.which
    monkeypatch.setattr(shutil, "which", lambda name: None if name == "bwrap" else real_which(name))
    with pytest.raises(SandboxUnavailable, match="apt-get install -y bubblewrap"):
        make_sandbox(SandboxConfig(type="bwrap"))


def test_namespace_refusal_is_unavailable():
    from harnessrl.sandbox.base import SandboxUnavailable
    from harnessrl.sandbox.bwrap import _start_error

    err = _start_error("bwrap: setting up uid map: Permission denied")
    assert isinstance(err, SandboxUnavailable) and "unprivileged user namespaces" in str(err)
    assert not isinstance(_start_error("bwrap: Can't find source path /nope"), SandboxUnavailable)


def test_scratch_dirs_of_dead_owners_are_swept(tmp_path):
    import subprocess

    from harnessrl.sandbox.bwrap import SCRATCH_PREFIX, _sweep_scratch_dirs

    child = subprocess.Popen(["true"])
    child.wait()
    stale = tmp_path / f"{SCRATCH_PREFIX}{child.pid}-abc"
    live = tmp_path / f"{SCRATCH_PREFIX}{os.getpid()}-abc"
    other = tmp_path / f"{SCRATCH_PREFIX}notapid"
    for d in (stale, live, other):
        d.mkdir()
    _sweep_scratch_dirs(tmp_path)
    assert not stale.exists() and live.exists() and other.exists()
