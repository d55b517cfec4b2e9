"""Standalone verifier of the chained and office tasks (copied into the sandbox as .verifier/verify.py,
or as reward/check.py in a ClawGym export).

Runs with the workspace as working directory, reads `checks.json` beside itself (a list of
{"name", "kind", ...}) and prints ONE JSON object {name: score in [0, 1]} on stdout, nothing else.
Every kind scores content, never a file merely existing: `file_absent` is only accepted inside an
`all` check beside a content check. Code from the workspace (the agent's) runs only in child
processes whose output is captured, so it can never write to this script's stdout, the reward
channel. Stdlib only: it runs under the sandbox's python3, not the project's venv.

Those children cannot reach this process, nor read the checks (docs/security.md, "The verifier and
the code it runs"): this script makes itself non-dumpable first (PR_SET_DUMPABLE 0: no
/proc/<pid>/mem, ptrace, process_vm_* or pidfd_getfd by a process of the same uid, without relying
on Yama), and each child (run_shut_out) starts in a session of its own and in a Landlock domain of
its own, which shuts it out of every process outside it (ptrace-class access; from ABI 6 signals
and abstract unix sockets) and out of the files of this script's directory (checks.json holds the
hidden inputs and expected values). Where Landlock is missing the child does not run and its check
fails. The sandbox adds its own layers: a read-only /proc, seccomp without the ptrace family.
"""

import ctypes
import hashlib
import json
import os
import subprocess
import sys

# Loads a module from a path in isolated mode (-I: no workspace on sys.path, so a planted json.py
# cannot shadow the stdlib), calls it with the inputs read from stdin, prints the results last.
_CALLER = """
import importlib.util, json, sys
calls = json.loads(sys.stdin.read())
spec = importlib.util.spec_from_file_location("agent_module", sys.argv[1])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
out = []
for name, args in calls:
    try:
        out.append(getattr(mod, name)(*args))
    except Exception as e:
        out.append("error: %s" % type(e).__name__)
print()
print(json.dumps(out))
"""


def _read(path):
    try:
        with open(path, "rb") as f:
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return None


def _lines(text):
    return [line.strip() for line in text.strip().splitlines()] if text is not None else None


def _number(text):
    try:
        return float(text.strip().split()[0])
    except (AttributeError, IndexError, ValueError):
        return None


def _table_rows(text):
    """The data rows of the first markdown table in text: lists of stripped cells, the header row
    and the |---| separator left out."""
    rows = [line.strip() for line in (text or "").splitlines() if line.strip().startswith("|")]
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    body = [c for c in cells if not all(set(x) <= set("-: ") and x for x in c)]
    return body[1:] if body else []


def _ini_value(text, section, key):
    current, found = None, None
    for line in (text or "").splitlines():
        s = line.strip()
        if s.startswith("[") and s.endswith("]"):
            current = s[1:-1].strip()
        elif current == section and "=" in s and s.split("=", 1)[0].strip() == key:
            found = s.split("=", 1)[1].strip()
    return found


def _same(a, b, tol=1e-6):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(a - b) <= tol
    return a == b


PR_GET_DUMPABLE, PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS = 3, 4, 38
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446  # every arch
LANDLOCK_RULE_PATH_BENEATH = 1
LANDLOCK_ACCESS_FS_READ_FILE = 1 << 2
LANDLOCK_SCOPE_ALL = 0x3  # abstract unix sockets | signals (ABI >= 6)
O_PATH = getattr(os, "O_PATH", 0o10000000)


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc():
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _syscall(libc, nr, *args):
    """syscall(2) with every integer passed as a long (a bare int leaves the upper half undefined)."""
    libc.syscall.restype = ctypes.c_long
    return libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])


def protect_self():
    """This process becomes non-dumpable: processes of its uid cannot open its memory or fds.
    True when it took (it holds until an execve, which this script never does)."""
    libc = _libc()
    if libc is None:
        return False
    libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)
    return libc.prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0


def _readable_around(hidden):
    """Every path whose tree stays readable: the siblings of `hidden` and of each of its
    ancestors (links left out: one could lead back into `hidden`)."""
    out, parent = [], "/"
    for part in [p for p in hidden.split("/") if p]:
        try:
            with os.scandir(parent) as entries:
                out += [e.path for e in entries if e.name != part and not e.is_symlink()]
        except OSError:
            pass
        parent = os.path.join(parent, part)
    return out


def shut_out_ruleset(hidden):
    """A Landlock ruleset (an fd) for the agent's code: no reading of files under `hidden` (the
    verifier's own directory: its checks and expected values), and from ABI 6 no signals or
    abstract sockets to processes outside its domain; every domain also forbids ptrace-class access
    (/proc/<pid>/mem, fds, process_vm_*) to processes outside it. None where Landlock is missing.
    The rules are the paths that exist now: a file the child creates directly in a directory on
    the way to `hidden` (the workspace root) is not readable to it; /tmp and subdirectories are."""
    libc = _libc()
    if libc is None:
        return None
    abi = _syscall(libc, SYS_LANDLOCK_CREATE_RULESET, None, 0, 1)  # LANDLOCK_CREATE_RULESET_VERSION
    if abi < 1:
        return None
    scoped = LANDLOCK_SCOPE_ALL if abi >= 6 else 0
    attr = _RulesetAttr(LANDLOCK_ACCESS_FS_READ_FILE, 0, scoped)
    fd = _syscall(libc, SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), 24 if abi >= 6 else 8, 0)
    if fd < 0:
        return None
    for path in _readable_around(os.path.realpath(hidden)):
        try:
            pfd = os.open(path, O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            continue
        rule = _PathBeneath(LANDLOCK_ACCESS_FS_READ_FILE, pfd)
        _syscall(libc, SYS_LANDLOCK_ADD_RULE, fd, LANDLOCK_RULE_PATH_BENEATH, ctypes.byref(rule), 0)
        os.close(pfd)
    return fd


def _enter(ruleset):
    """In the child, before exec: into the Landlock domain of `ruleset`, or no exec at all."""
    def enter():
        libc = _libc()
        if libc is None or libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 or \
                _syscall(libc, SYS_LANDLOCK_RESTRICT_SELF, ruleset, 0) != 0:
            os._exit(126)  # a child that cannot be shut out does not run
    return enter


def run_shut_out(cmd, timeout, stdin="", hidden=None):
    """The agent's code in a child: output captured (never this process's stdout), a session and
    a Landlock domain of its own that shuts it out of this process and of `hidden` (default: this
    script's directory). None when it could not run, Landlock missing included: a check that runs
    the agent's code fails closed rather than run it where it could reach the verifier."""
    ruleset = shut_out_ruleset(hidden or os.path.dirname(os.path.abspath(__file__)))
    if ruleset is None:
        return None
    try:
        return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout,
                              start_new_session=True, preexec_fn=_enter(ruleset), close_fds=True)
    except (OSError, subprocess.SubprocessError):
        return None
    finally:
        os.close(ruleset)


def score(check, top=True):
    kind, path = check["kind"], check.get("path", "")
    text = _read(path) if path else None
    if kind == "all":
        return all(score(c, top=False) for c in check["checks"])
    if kind == "file_absent":
        if top:
            raise ValueError("file_absent pays for nothing alone; put it in an 'all' check")
        return not os.path.exists(path)
    if kind == "text_equals":
        return text is not None and text.strip() == check["value"].strip()
    if kind == "bytes_equal":
        return text is not None and text == check["value"]
    if kind == "number_equals":
        value = _number(text) if text is not None else None
        return value is not None and abs(value - check["value"]) <= check.get("tol", 1e-6)
    if kind == "lines_equal":
        return _lines(text) == [line.strip() for line in check["lines"]]
    if kind == "line_at":
        lines = _lines(text) or []
        return len(lines) > check["index"] and lines[check["index"]] == check["value"].strip()
    if kind == "lines_from":  # the lines from `start` on, exactly these
        lines = _lines(text)
        return lines is not None and lines[check["start"]:] == [x.strip() for x in check["lines"]]
    if kind == "lines_except":  # byte-equal to these lines except line `index` (the one to change)
        got, want, i = (text or "").split("\n"), check["lines"], check["index"]
        return text is not None and len(got) == len(want) and got[:i] + got[i + 1:] == want[:i] + want[i + 1:]
    if kind == "line_set":
        lines = [x for x in (_lines(text) or []) if x]
        return bool(lines) and len(lines) == len(set(lines)) and set(lines) == set(check["lines"])
    if kind == "order_respects":  # every item exactly once, each pair [a, b] with a on an earlier line
        lines = [x for x in (_lines(text) or []) if x]
        if len(lines) != len(set(lines)) or set(lines) != set(check["items"]):
            return False
        at = {x: i for i, x in enumerate(lines)}
        return all(at[a] < at[b] for a, b in check["pairs"])
    if kind == "md_row":  # a table row whose first cell is key and whose second cell is the number
        rows = [r for r in _table_rows(text) if r and r[0].lower() == check["key"].lower()]
        return len(rows) == 1 and len(rows[0]) > 1 and _number(rows[0][1]) == float(check["value"])
    if kind == "md_keys":  # the first cells of the table's rows, in order
        return [r[0].lower() for r in _table_rows(text) if r] == [k.lower() for k in check["keys"]]
    if kind == "ini_value":
        return _ini_value(text, check["section"], check["key"]) == check["value"]
    if kind == "py_test":  # the test file is unchanged and running it exits 0 after its tests ran
        if text is None or hashlib.sha256(text.encode()).hexdigest() != check["sha256"]:
            return False
        res = run_shut_out([sys.executable, path], check.get("timeout", 20))
        ran = "Ran %d test" % check["tests"]
        return res is not None and res.returncode == 0 and ran in res.stderr and "\nOK" in res.stderr
    if kind == "py_values":  # the module's functions give the expected values on these inputs
        calls = [[name, args] for name, args, _ in check["calls"]]
        cmd = [sys.executable, "-I", "-c", _CALLER, path]
        res = run_shut_out(cmd, check.get("timeout", 20), json.dumps(calls))
        if res is None or res.returncode != 0 or not res.stdout.strip():
            return False
        try:
            got = json.loads(res.stdout.strip().splitlines()[-1])
        except ValueError:
            return False
        want = [expected for _, _, expected in check["calls"]]
        return isinstance(got, list) and len(got) == len(want) and all(map(_same, got, want))
    raise ValueError("unknown check kind: " + kind)


def main():
    protect_self()
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "checks.json"), encoding="utf-8") as f:
        checks = json.load(f)
    print(json.dumps({c["name"]: float(bool(score(c))) for c in checks}))


if __name__ == "__main__":
    sys.exit(main())
