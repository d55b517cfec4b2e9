"""Isolation acceptance tests with REAL bubblewrap: each escape attempt must fail (files, privileges,
processes, limits; the network side is in test_bwrap_network.py)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest

from harnessrl.sandbox import SandboxConfig, make_sandbox

pytestmark = [
    pytest.mark.bwrap,
    pytest.mark.skipif(
        shutil.which("bwrap") is None, reason="bubblewrap missing: apt-get install bubblewrap"
    ),
]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def sb():
    with make_sandbox(SandboxConfig(memory_mb=512, max_procs=128)) as box:
        yield box


def _sh(box, script: str, **kw):
    return box.run(["sh", "-c", script], **kw)


def _host_pids(marker: str) -> list[int]:
    out = subprocess.run(["pgrep", "-f", marker], check=False, capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _describe(pid: int) -> str:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        keep = [ln for ln in status.splitlines() if ln.split(":")[0] in ("State", "PPid", "NSpid")]
        fds = sorted(os.listdir(f"/proc/{pid}/fd"))
        return f"{pid} {cmd!r} {keep} fds={fds}"
    except OSError as e:
        return f"{pid}: {e}"


def _wait_gone(marker: str, timeout_s: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout_s
    while (pids := _host_pids(marker)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return pids


def test_cannot_read_host_home():
    secret = Path.home() / f".harnessrl-secret-{uuid.uuid4().hex}"
    secret.write_text("TOP-SECRET-HOME")
    try:
        with make_sandbox(SandboxConfig()) as box:
            assert "TOP-SECRET" in secret.read_text()
            res = _sh(box, f"cat {secret}; ls -a {Path.home()}")
            assert "TOP-SECRET" not in res.stdout
            assert secret.name not in res.stdout
            assert box.run(["cat", str(secret)]).returncode != 0
    finally:
        secret.unlink()


def test_cannot_read_project_checkout(sb):
    target = REPO / "pyproject.toml"
    assert target.exists()
    res = sb.run(["cat", str(target)])
    assert res.returncode != 0 and "harnessrl" not in res.stdout
    listing = _sh(sb, f"ls -a {REPO} 2>&1; ls {REPO}/src 2>&1").stdout
    assert "pyproject.toml" not in listing and "harnessrl" not in listing


def test_a_directly_started_process_sees_its_own_working_dir_not_the_hosts(sb):
    # a harness exec'd without a shell (node, python) reads PWD as given: it must name the
    # sandbox's directory, never the host's sandbox root (a host path leak, and a prompt that
    # differs between two runs of one task)
    assert sb.run(["printenv", "PWD"]).stdout.strip() == sb.inner_workspace
    sub = sb.run(["printenv", "PWD"], cwd="sub") if _sh(sb, "mkdir -p sub").returncode == 0 else None
    assert sub is not None and sub.stdout.strip() == f"{sb.inner_workspace}/sub"


def test_cannot_write_outside_workspace(sb, tmp_path: Path):
    name = f"hrl-escape-{uuid.uuid4().hex}"
    for target in (f"/usr/{name}", f"/etc/{name}", f"{REPO}/.venv/{name}", f"{tmp_path}/{name}", f"/{name}"):
        res = _sh(sb, f"echo x > {target}")
        assert res.returncode != 0, target
        assert not Path(target).exists(), target
    # /tmp inside is private: a file written there does not appear on the host
    assert _sh(sb, f"echo x > /tmp/{name} && cat /tmp/{name}").stdout == "x\n"
    assert not Path(f"/tmp/{name}").exists()
    assert _sh(sb, "echo ok > result.txt && cat result.txt").stdout == "ok\n"


def test_no_capabilities_and_no_new_privs():
    for uid in (1000, 0):
        with make_sandbox(SandboxConfig(uid=uid)) as box:
            status = box.run(["cat", "/proc/self/status"]).stdout
            fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
            assert fields["CapEff"].strip() == "0" * 16
            assert fields["NoNewPrivs"].strip() == "1"
            assert _sh(box, "mount -o remount,rw,bind /usr").returncode != 0


def test_no_outside_network(sb):
    res = _sh(sb, "cat /proc/net/dev | tail -n +3 | cut -d: -f1")
    assert [x.strip() for x in res.stdout.split()] == ["lo"]


DAEMON = (
    "import os, sys\n"
    "if os.fork(): sys.exit(0)\n"
    "os.setsid()\n"
    "if os.fork(): sys.exit(0)\n"
    "os.execvp('sleep', ['sleep', sys.argv[1]])\n"
)


def test_leftovers_of_a_run_are_killed_when_it_exits():
    marker = f"4141.{uuid.uuid4().int % 10**9}"
    with make_sandbox(SandboxConfig()) as box:
        assert box.run(["python", "-c", DAEMON, marker]).ok
        assert _wait_gone(marker) == []  # the double-forked daemon went with its run
        assert not box.run(["pgrep", "-f", marker]).ok


def test_double_forked_daemon_does_not_survive_destroy():
    marker = f"4242.{uuid.uuid4().int % 10**9}"
    box = make_sandbox(SandboxConfig())
    try:
        res = box.run(["python", "-c", DAEMON, marker], keep_background=True)
        assert res.ok, res
        assert _host_pids(marker), "the daemon runs on the host before destroy"
        assert box.run(["pgrep", "-f", marker]).ok  # visible inside too
    finally:
        box.destroy()
    assert _wait_gone(marker) == []


COUNTED_FORKS = (
    "import os, sys, time\n"
    "n = 0\n"
    "while True:\n"
    "    try:\n"
    "        pid = os.fork()\n"
    "    except OSError as e:\n"
    "        print('fork failed after', n, e)\n"
    "        sys.exit(3)\n"
    "    if pid == 0:\n"
    "        time.sleep(600)\n"
    "        os._exit(0)\n"
    "    n += 1\n"
    "    if n > 100000:\n"
    "        print('no limit')\n"
    "        sys.exit(0)\n"
)


def test_fork_bomb_hits_the_process_limit():
    limit = 40
    box = make_sandbox(SandboxConfig(max_procs=limit))
    try:
        res = box.run(["python", "-c", COUNTED_FORKS], timeout_s=120)
        assert res.returncode == 3, res
        forked = int(res.stdout.split()[3])
        assert 0 < forked < limit
        if box._cgroups is not None:
            assert "procs" in res.limits_hit
        # a real recursive bomb: the sandbox reports failure, the host keeps working
        bomb = box.run(["bash", "-c", ":(){ :|:& };: ; sleep 3; exit 9"], timeout_s=6)
        assert not bomb.ok
        assert subprocess.run(["true"], check=False).returncode == 0
        cg = box._cgroups
    finally:
        box.destroy()
    assert subprocess.run(["true"], check=False).returncode == 0
    if cg is not None:
        assert not cg.pids_dir.exists()


def test_memory_limit():
    with make_sandbox(SandboxConfig(memory_mb=128)) as box:
        hog = "b = bytearray(512 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint('allocated')"
        res = box.run(["python", "-c", hog], timeout_s=120)
        assert not res.ok and "allocated" not in res.stdout
        if box._cgroups is not None:
            assert res.limits_hit == ("memory",) and "memory limit (128 MiB)" in res.stderr
        small = box.run(["python", "-c", "b = bytearray(16 << 20); print('fine')"])
        assert small.ok and small.stdout.strip() == "fine" and small.limits_hit == ()


def test_wall_time_limit_kills_the_tree():
    marker = f"4343.{uuid.uuid4().int % 10**9}"
    with make_sandbox(SandboxConfig(wall_time_s=1.0)) as box:
        res = _sh(box, f"setsid sleep {marker} & sleep 30")
        assert res.timed_out and not res.ok
        assert _wait_gone(marker) == []  # the setsid'd child of the timed-out call is gone too
        assert box.run(["true"]).ok  # the sandbox itself lives on


def test_workspace_size_limit():
    with make_sandbox(SandboxConfig(workspace_mb=8)) as box:
        res = _sh(box, "head -c 16000000 /dev/zero > big.bin")
        assert res.returncode != 0 and "No space left" in res.stderr
        assert _sh(box, "rm big.bin && head -c 1000000 /dev/zero > small.bin").ok


def test_sandboxes_cannot_see_each_other(tmp_path: Path):
    with make_sandbox(SandboxConfig()) as a, make_sandbox(SandboxConfig()) as b:
        token = uuid.uuid4().hex
        assert _sh(a, f"echo {token} > mine.txt").ok
        assert "mine.txt" not in b.run(["ls", "-a"]).stdout
        res = _sh(
            b,
            f"grep -rsl {token} / --exclude-dir=proc --exclude-dir=usr --exclude-dir=.venv --exclude-dir=.pyenv; ls /proc",
        )
        assert token not in res.stdout
        assert str(a.workspace) != str(b.workspace)
        # b's pid namespace holds only b's processes
        pids = [p for p in res.stdout.split() if p.isdigit()]
        assert len(pids) < 10


def test_clawgym_layout_and_python(tmp_path: Path):
    src = tmp_path / "input_files"
    (src / "input").mkdir(parents=True)
    (src / "input" / "data.json").write_text('{"a": 1}')
    cfg = SandboxConfig(workspace_mount="/root/.openclaw/workspace", home="/root", uid=0)
    with make_sandbox(cfg, workspace_src=src) as box:
        assert box.inner_workspace == "/root/.openclaw/workspace"
        res = _sh(box, "pwd; cat /root/.openclaw/workspace/input/data.json; echo; echo $HOME; id -u")
        assert res.stdout.splitlines() == ["/root/.openclaw/workspace", '{"a": 1}', "/root", "0"]
        for exe in ("python", "python3"):
            r = box.run([exe, "-c", "import yaml, json; print(json.dumps(yaml.safe_load('x: 1')))"])
            assert r.ok and r.stdout.strip() == '{"x": 1}', r
        assert _sh(box, "echo '[]' > /root/.openclaw/openclaw.json && bash -c 'echo ok'").stdout == "ok\n"


def test_copy_in_out_and_planted_links(tmp_path: Path):
    reward = tmp_path / "reward"
    reward.mkdir()
    (reward / "reward.sh").write_text("python reward/check.py | tail -1\n")
    (reward / "check.py").write_text("print(0.5)\n")
    with make_sandbox(SandboxConfig()) as box:
        box.copy_in(reward, "reward")
        assert box.run(["bash", "reward/reward.sh"]).stdout == "0.5\n"
        assert _sh(
            box,
            "mkdir out && echo r > out/report.md && ln -s /etc/passwd out/leak && "
            "ln -s report.md out/ok-link",
        ).ok
        box.copy_out("out", tmp_path / "out")
        box.copy_out("out/report.md", tmp_path / "single.md")
    assert (tmp_path / "out" / "report.md").read_text() == "r\n"
    assert (tmp_path / "single.md").read_text() == "r\n"
    assert not (tmp_path / "out" / "leak").exists() and not (tmp_path / "out" / "leak").is_symlink()
    assert os.readlink(tmp_path / "out" / "ok-link") == "report.md"


def test_host_env_does_not_leak(monkeypatch):
    monkeypatch.setenv("HRL_SECRET_TOKEN", "sk-should-not-leak")
    with make_sandbox(SandboxConfig()) as box:
        assert "sk-should-not-leak" not in box.run(["env"]).stdout


def test_destroy_leaves_nothing(tmp_path: Path):
    box = make_sandbox(SandboxConfig())
    cg, root, proc = box._cgroups, box._root, box._proc
    assert _sh(box, "sleep 1000 & sleep 1001 &", keep_background=True).ok
    box.destroy()
    box.destroy()
    assert proc.poll() is not None and not root.exists()
    if cg is not None:
        assert not cg.pids_dir.exists() and not any(d.exists() for d in cg.other_dirs)


def test_sandbox_processes_are_in_its_cgroups():
    with make_sandbox(SandboxConfig()) as box:
        cg = box._cgroups
        if cg is None:
            pytest.skip("no writable cgroups here (rlimit fallback)")
        res = _sh(box, "sleep 100 & echo started")
        assert res.ok
        procs = [int(p) for p in (cg.pids_dir / "init" / "cgroup.procs").read_text().split()]
        assert box._proc.pid in procs and box._ns_pid in procs
        mem = (
            [int(p) for p in (cg.other_dirs[0] / "cgroup.procs").read_text().split()]
            if cg.other_dirs
            else procs
        )
        assert box._ns_pid in mem


def test_destroy_during_a_run_ends_the_run():
    marker = f"4444.{uuid.uuid4().int % 10**9}"
    box = make_sandbox(SandboxConfig())
    out: list = []
    t = threading.Thread(target=lambda: out.append(box.run(["sleep", marker], timeout_s=120)))
    t.start()
    deadline = time.monotonic() + 30
    while not _host_pids(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _host_pids(marker), "the run should have started"
    box.destroy()
    t.join(timeout=30)
    assert not t.is_alive() and not out[0].ok and not out[0].timed_out
    assert _wait_gone(marker) == []


def test_a_harness_cannot_kill_its_own_sandbox():
    """The keeper is pid 1: `kill -9 -1` / `kill -9 1` from inside end the caller's peers, never the
    sandbox, so the workspace the policy left can still be scored (issue 20, hole 5)."""
    with make_sandbox(SandboxConfig()) as box:
        res = _sh(box, "echo done > out.txt; sleep 30 & kill -9 -1; kill -9 1; kill -INT 1; kill -TERM 1; echo alive")
        assert res.stdout.strip() == "alive"
        time.sleep(0.3)
        assert box.alive and _sh(box, "cat out.txt").stdout == "done\n"
        assert _sh(box, "cat /proc/1/comm").stdout.strip() == "bash"  # the keeper is the init
        # and it reaps orphans: 40 double-forked children that exit leave no zombie behind
        _sh(box, "for i in $(seq 40); do (sh -c 'true' &) ; done")
        zombies = "grep -l zombie /proc/[0-9]*/status 2>/dev/null | wc -l"
        deadline = time.monotonic() + 20  # a loaded machine may delay the reaping, never prevent it
        while _sh(box, zombies).stdout.strip() != "0" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _sh(box, zombies).stdout.strip() == "0"


def test_a_sandbox_whose_keeper_died_reports_it():
    with make_sandbox(SandboxConfig()) as box:
        os.kill(box._ns_pid, signal.SIGKILL)  # only from outside (the host) can the keeper die
        deadline = time.monotonic() + 10
        while box.alive and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not box.alive
        res = box.run(["true"])
        assert not res.ok and "sandbox is gone" in res.stderr


def test_output_files_are_bounded():
    with make_sandbox(SandboxConfig(workspace_mb=8, scratch_mb=8)) as box:
        assert box._fsize_mb == 1024
        res = _sh(box, "ulimit -f; ulimit -c")
        assert res.stdout.split() == [str(1024 * 2048), "0"]


def test_extra_ro_binds_are_visible_read_only(tmp_path: Path):
    shared = tmp_path / "harness-install"
    shared.mkdir()
    (shared / "tool.sh").write_text("echo tool-ran\n")
    cfg = SandboxConfig(extra_ro_binds=[str(shared), f"{shared}:/opt/tool"])
    with make_sandbox(cfg) as box:
        assert box.run(["sh", f"{shared}/tool.sh"]).stdout == "tool-ran\n"
        assert box.run(["sh", "/opt/tool/tool.sh"]).stdout == "tool-ran\n"
        assert not _sh(box, f"echo x > {shared}/new.txt").ok
        assert not (shared / "new.txt").exists()
        assert _sh(box, f"ls {tmp_path}").stdout.split() == ["harness-install"]  # only the bound dir


HOST_THAT_DIES = (
    "import sys\n"
    "from harnessrl.sandbox import SandboxConfig, bwrap, make_sandbox\n"
    "if sys.argv[3] == 'no-cgroups':  # then only the keeper can clean up\n"
    "    bwrap.SandboxCgroups.create = classmethod(lambda cls, *a: None)\n"
    "box = make_sandbox(SandboxConfig(memory_mb=None, max_procs=None))\n"
    "assert box.run(['python', '-c', sys.argv[2], sys.argv[1]], keep_background=True).ok\n"
    "print(box._cgroups.pids_dir if box._cgroups else '', flush=True)\n"
    "sys.stdin.read()\n"
)


@pytest.mark.parametrize("cgroups", ["no-cgroups", "cgroups"])
def test_sandbox_dies_with_its_host_process(cgroups):
    """SIGKILL the process that owns a sandbox: the keeper's pipe closes and everything goes.
    Without cgroups only the keeper can do it (another process's sweep cannot interfere)."""
    import signal
    import sys

    marker = f"4545.{uuid.uuid4().int % 10**9}"
    host = subprocess.Popen(
        [sys.executable, "-c", HOST_THAT_DIES, marker, DAEMON, cgroups],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        cg_dir = host.stdout.readline().strip()
        assert _host_pids(marker), "the daemon runs while its host lives"
        host.send_signal(signal.SIGKILL)
        host.wait()
        left = _wait_gone(marker, 30)
        assert left == [], [_describe(p) for p in left]
    finally:
        if host.poll() is None:
            host.kill()
        host.stdin.close()
        host.stdout.close()
    if cg_dir:  # the dead host's cgroups are swept by the next sandbox
        make_sandbox(SandboxConfig()).destroy()
        assert not Path(cg_dir).exists()


# Run inside the sandbox: the harness SDKs and a raw client against the relayed proxy port.
SYSCALL_PROBE = r"""
import ctypes, errno, json, os, threading, subprocess
libc = ctypes.CDLL(None, use_errno=True)
def call(nr, *args):
    r = libc.syscall(nr, *[ctypes.c_ulong(a) for a in args])
    return errno.errorcode.get(ctypes.get_errno(), "?") if r == -1 else "ALLOWED"
out = {
    "unshare_user": call(272, 0x10000000),
    "unshare_mount": call(272, 0x00020000),
    "clone_newuser": call(56, 0x10000000 | 17, 0, 0, 0, 0),
    "clone3": call(435, 0, 0),
    "ptrace": call(101, 0, 0, 0, 0),
    "mount": call(165, 0, 0, 0, 0, 0),
    "keyctl": call(250, 0, 0, 0, 0, 0),
    "bpf": call(321, 0, 0, 0),
    "perf_event_open": call(298, 0, 0, 0, 0, 0),
    "kexec_load": call(246, 0, 0, 0, 0),
    "io_uring_setup": call(425, 1, 0),
    "reboot": call(169, 0, 0, 0, 0),
}
t = threading.Thread(target=lambda: None); t.start(); t.join()  # plain clone still works
out["subprocess"] = subprocess.run(["sh", "-c", "echo $((6*7))"], capture_output=True, text=True).stdout.strip()
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
out["Seccomp"] = status["Seccomp"].strip()
out["CapBnd"] = status["CapBnd"].strip()
print(json.dumps(out))
"""


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="the probe uses x86_64 syscall numbers")
def test_capability_bounding_set_is_empty_and_seccomp_blocks_dangerous_syscalls():
    """Issue 12: no capabilities (bounding set too, also for uid 0) and the default seccomp profile,
    for run() and for the sandbox's own keeper process."""
    import json

    for uid in (1000, 0):
        with make_sandbox(SandboxConfig(uid=uid)) as box:
            res = box.run(["python", "-c", SYSCALL_PROBE])
            assert res.ok, res.stderr
            out = json.loads(res.stdout)
            for name in ("unshare_user", "unshare_mount", "clone_newuser", "ptrace", "mount", "keyctl", "bpf",
                         "perf_event_open", "kexec_load", "reboot"):
                assert out[name] == "EPERM", (uid, name, out[name])
            assert out["clone3"] == "ENOSYS" and out["io_uring_setup"] == "ENOSYS"
            assert out["subprocess"] == "42"
            assert out["Seccomp"] == "2" and out["CapBnd"] == "0" * 16
            assert _sh(box, "unshare -U true").returncode != 0
            keeper = _sh(box, "grep -E '^(Seccomp|CapBnd|CapEff):' /proc/1/status").stdout.split()
            assert keeper == ["CapEff:", "0" * 16, "CapBnd:", "0" * 16, "Seccomp:", "2"], keeper
    # The profile can be turned off. Not with the probe: unfiltered, its calls really run (ptrace(TRACEME)
    # leaves the process stopped at its next signal), so read the status line alone.
    with make_sandbox(SandboxConfig(seccomp=False)) as box:
        res = _sh(box, "grep -E '^Seccomp:' /proc/self/status")
        assert res.returncode == 0, res.stderr
        assert res.stdout.split() == ["Seccomp:", "0"], res.stdout


NON_ROOT_PROBE = """
import sys
sys.path[:0] = sys.argv[1:3]
from harnessrl.sandbox import make_sandbox, SandboxConfig
with make_sandbox(SandboxConfig(python=False)) as sb:
    r = sb.run(["sh", "-c", "id -u; grep -E '^(CapBnd|CapEff|Seccomp):' /proc/self/status; "
                            "echo x > w.txt && cat w.txt; chmod 0 /dev/null 2>/dev/null; echo chmod=$?"])
    print(r.stdout, end="")
"""


@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/python3"),
                    reason="runs the unprivileged path as uid 65534 with the system Python")
def test_the_unprivileged_host_user_path():
    """Not root on the host: the same entry steps (no root to drop), an empty bounding set too."""
    import sysconfig
    import tempfile

    src = str(Path(__file__).resolve().parents[2] / "src")
    site = sysconfig.get_paths()["purelib"]
    tmp_path = Path(tempfile.mkdtemp(prefix="harnessrl-nonroot-"))  # pytest's tmp is root-only
    tmp_path.chmod(0o755)
    cache = tmp_path / "cache"
    cache.mkdir()
    os.chown(cache, 65534, 65534)
    probe = tmp_path / "probe.py"
    probe.write_text(NON_ROOT_PROBE)
    probe.chmod(0o644)
    res = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "env", "-i",
                          "PATH=/usr/bin:/bin", f"HOME={cache}", f"HARNESSRL_CACHE={cache}",
                          "/usr/bin/python3", str(probe), src, site],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    shutil.rmtree(tmp_path, ignore_errors=True)
    if "ModuleNotFoundError" in res.stderr or "ImportError" in res.stderr:
        pytest.skip(f"the system Python cannot import the venv's packages: {res.stderr.strip()[-200:]}")
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["1000", "CapEff:", "0" * 16, "CapBnd:", "0" * 16, "Seccomp:", "2", "x",
                                  "chmod=1"], res.stdout
