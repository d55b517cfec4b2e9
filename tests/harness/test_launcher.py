"""The in-sandbox launcher: private dirs, config files, collected files, exit classification and
killing the whole process tree (setsid and double-forked daemons included) on a time limit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from harnessrl.harness import launcher
from harnessrl.harness.base import LaunchSpec, RunDirs, classify, launch, launcher_argv, split_collected


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie counts as dead
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _spec(script: str, dirs: RunDirs, **kw) -> LaunchSpec:
    return LaunchSpec(argv=["/bin/sh", "-c", script], env={"HOME": dirs.home, "TMPDIR": dirs.tmp},
                      cwd=None, run_id=dirs.run_id, dirs=dirs.all(), **kw)


def test_files_dirs_and_collect(fake_sandbox):
    dirs = RunDirs.fresh()
    spec = _spec('cat "$HOME/conf/a.txt"; echo made > "$TMPDIR/out.txt"; echo last line', dirs,
                 files={f"{dirs.home}/conf/a.txt": "config body\n"},
                 collect=[f"{dirs.tmp}/out.txt", f"{dirs.root}/missing.txt"])
    out = launch(fake_sandbox, spec, timeout_s=30)
    assert out.status == "ok" and out.exit_code == 0
    assert out.stdout.strip().splitlines() == ["config body", "last line"]
    assert out.files == {f"{dirs.tmp}/out.txt": "made\n", f"{dirs.root}/missing.txt": None}
    run_root = fake_sandbox.home / ".harnessrl" / dirs.run_id
    assert (run_root / "home" / "conf" / "a.txt").read_text() == "config body\n"
    assert (run_root / "tmp").is_dir()


def test_env_path_token_and_sandbox_env_kept(fake_sandbox):
    dirs = RunDirs.fresh()
    spec = LaunchSpec(argv=["/bin/sh", "-c", 'echo "$PATH"; echo "$EXTRA"'], cwd=None, run_id=dirs.run_id,
                      env={"PATH": "/opt/first:@PATH@", "EXTRA": "@RUN@/x"})
    out = launch(fake_sandbox, spec, timeout_s=30)
    path, extra = out.stdout.strip().splitlines()
    assert path == "/opt/first:" + os.environ["PATH"]
    assert extra == str(fake_sandbox.home / ".harnessrl" / dirs.run_id / "x")


def test_nonzero_exit_is_harness_error_with_stderr(fake_sandbox):
    out = launch(fake_sandbox, _spec("echo boom >&2; exit 3", RunDirs.fresh()), timeout_s=30)
    assert out.status == "harness_error" and out.exit_code == 3
    assert "boom" in out.error and "3" in out.error


def test_missing_binary_is_harness_error(fake_sandbox):
    dirs = RunDirs.fresh()
    spec = LaunchSpec(argv=["/nonexistent/harness-bin"], env={}, cwd=None, run_id=dirs.run_id)
    out = launch(fake_sandbox, spec, timeout_s=30)
    assert out.status == "harness_error" and out.exit_code == 127
    assert "cannot start" in out.stderr


def test_timeout_kills_whole_tree(fake_sandbox, tmp_path):
    pids = tmp_path / "pids"
    script = (f'sleep 300 & echo $! >> {pids}; '
              f'setsid sh -c "sleep 300 & echo \\$! >> {pids}; wait" & '
              f'(sh -c "sleep 300 & echo \\$! >> {pids}; wait" &) ; '
              f'echo started; wait')
    out = launch(fake_sandbox, _spec(script, RunDirs.fresh()), timeout_s=2)
    assert out.status == "timeout" and out.exit_code == launcher.TIMEOUT_EXIT
    assert "killed" in out.stderr
    recorded = [int(x) for x in pids.read_text().split()]
    assert len(recorded) == 3
    assert not any(_alive(p) for p in recorded)
    # the sandbox was asked for more time than the launcher's limit: the launcher kills first
    assert fake_sandbox.calls[-1]["timeout_s"] > 2


def test_leftover_daemon_is_killed_after_normal_exit(fake_sandbox, tmp_path):
    pidfile = tmp_path / "daemon"
    script = f'(setsid sleep 300 & echo $! > {pidfile}) ; echo done'
    out = launch(fake_sandbox, _spec(script, RunDirs.fresh()), timeout_s=60)
    assert out.status == "ok" and out.stdout.strip() == "done"
    assert not _alive(int(pidfile.read_text()))
    assert "leftover" in out.stderr


def test_sigterm_to_launcher_kills_tree(tmp_path):
    pidfile = tmp_path / "child"
    dirs = RunDirs.fresh()
    spec = _spec(f"sleep 300 & echo $! > {pidfile}; wait", dirs)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    proc = subprocess.Popen(launcher_argv(spec, 120), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    for _ in range(200):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.05)
    child = int(pidfile.read_text())
    assert _alive(child)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert proc.returncode == launcher.TERM_EXIT
    assert not _alive(child)


def test_classify():
    assert classify(0, False) == "ok"
    assert classify(1, False) == "harness_error"
    assert classify(None, True) == "timeout"
    assert classify(launcher.TIMEOUT_EXIT, False) == "timeout"


def test_split_collected():
    files = {"a": "x\ny", "b": None}
    text = "out1\nout2\n" + "\n" + launcher.FILES_MARKER + json.dumps(files) + "\n"
    stdout, got = split_collected(text)
    assert stdout.strip() == "out1\nout2" and got == files
    assert split_collected("plain\n") == ("plain\n", {})
    assert split_collected(launcher.FILES_MARKER + "{}\n") == ("", {})


def test_launcher_source_is_stdlib_only():
    # it is sent to the sandbox as `python -c`: it must not import the project
    src = Path(launcher.__file__).read_text()
    assert "harnessrl" not in "".join(ln for ln in src.splitlines() if ln.startswith(("import", "from")))
    argv = launcher_argv(_spec("true", RunDirs.fresh()), 5)
    assert argv[0] == sys.executable and argv[2] == "-c"
