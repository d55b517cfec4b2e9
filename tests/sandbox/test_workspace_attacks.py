"""Workspace shapes that used to dodge the score or break the host (issue 25), through the real
runner, a real proxy, a `command:` harness and real bubblewrap.

Each attack makes one model call first (the policy has sampled, so its end must be scored) and
writes the right answer, so only the workspace's shape decides the outcome: a shape past a
host-side limit is scored 0 as `workspace_limit` (never sandbox_error / runner_error, never
retried); a shape within the limits is copied keeping hard links and holes, so the verifier's
workspace is no bigger than the agent's. Every host-side scratch dir is gone afterwards and a
later sandbox on the same host runs as usual. The property test at the end builds random trees
inside a sandbox and checks the verifier's copy path (sandbox/treeops.py, tarcopy.py) on them.
"""

from __future__ import annotations

import json
import os
import posixpath
import stat
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from harnessrl.engine.scripted import ScriptedEngine
from harnessrl.harness.command import CommandAdapter
from harnessrl.proxy.server import ProxyServer
from harnessrl.rollout.jobs import RolloutJob, RunOptions, run_rollout
from harnessrl.rollout.proxy_link import LocalProxy
from harnessrl.sandbox import bwrap, bwrap_start
from harnessrl.sandbox.base import SandboxConfig, WorkspaceLost
from harnessrl.sandbox.factory import make_sandbox
from harnessrl.sandbox.health import preflight
from harnessrl.sandbox.treeops import SYMLINK_COST, TreeLimits, WorkspaceLimitExceeded, remove_tree
from harnessrl.sandbox.views import WorkspaceLinkRefused, fresh_view
from harnessrl.store import RunStore
from harnessrl.tasks.model import Task, Verifier

pytestmark = pytest.mark.bwrap

BWRAP = SandboxConfig(type="bwrap")
CALL = """\
import json, os, urllib.request
body = json.dumps({"model": "m", "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}).encode()
req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", body,
                             {"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
urllib.request.urlopen(req, timeout=60).read()
"""
# pays for out.txt == ok; `small`: the verifier's own workspace holds under 3 MiB (its tmpfs usage)
VERIFY = """\
import json, os, pathlib
p = pathlib.Path('out.txt')
out = float(p.is_file() and p.read_text().strip() == 'ok')
vfs = os.statvfs('.')
used = (vfs.f_blocks - vfs.f_bfree) * vfs.f_frsize
print(json.dumps({'reward': out, 'out': out, 'small': float(used < 3 << 20)}))
"""
TASK = Task(id="shape", instruction="Write ok into out.txt.", files={"in.txt": b"x\n"},
            verifier=Verifier("checks", "python3 .verifier/verify.py", files={"verify.py": VERIFY.encode()}))
MKDEEP = "python3 -c \"import os\nfor i in range({n}):\n  os.mkdir('{name}'); os.chdir('{name}')\nopen('f', 'w').close()\""
SCRIPTS = {
    "honest": "call; echo ok > out.txt",
    # a recursive host-side walk raised RecursionError (runner_error) and left the scratch dir behind
    "deep_tree": "call; echo ok > out.txt; mkdir deep && cd deep && " + MKDEEP.format(n=3000, name="d"),
    # long names: the verifier's sandbox failed (ENAMETOOLONG, sandbox_error) and the rollout was re-run
    "long_names": "call; echo ok > out.txt; " + MKDEEP.format(n=30, name="n" * 250),
    # 1 MiB x 20 hard links arrived as 21 MiB of separate files
    "hard_links": "call; echo ok > out.txt; head -c 1048576 /dev/urandom > big; "
                  "for i in $(seq 20); do ln big link$i; done",
    # an 8 MiB sparse file arrived fully allocated
    "sparse": "call; echo ok > out.txt; truncate -s 8M sparse.bin",
    # apparent size past the workspace's own size (a 16 MiB tmpfs holds a 64 MiB hole)
    "sparse_huge": "call; echo ok > out.txt; truncate -s 64M huge.bin",
    # 20,000 empty files: 0.4 s to make, 4.4 s of host-side copy outside every timeout
    "many_files": "call; echo ok > out.txt; mkdir m && cd m && "
                  "python3 -c \"[open(str(i), 'w').close() for i in range(20000)]\"",
}


@pytest.fixture(scope="module")
def renderer():
    from harnessrl.engine.model import smollm2_tokenizer_dir
    from harnessrl.render.renderer import Renderer

    return Renderer.from_pretrained(smollm2_tokenizer_dir())


@pytest.fixture
def store(tmp_path):
    s = RunStore(tmp_path / "run")
    yield s
    s.close()


@pytest.fixture
def proxy(renderer, store):
    engine = ScriptedEngine(lambda ids: renderer.encode("ok") + [renderer.eot_id], eos_ids=renderer.stop_ids)
    server = ProxyServer(engine, store, renderer).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def scripts(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("shapes")
    (d / "call.py").write_text(CALL)
    for name, body in SCRIPTS.items():
        (d / f"{name}.sh").write_text(f"call() {{ python3 {d}/call.py; }}\n{body}\n")
    for p in [d, *d.iterdir()]:
        p.chmod(0o755)
    return d


@pytest.fixture
def host_tmp(monkeypatch):
    """The host's temp dir for this test alone: every scratch dir the runner makes lands here."""
    d = Path(tempfile.mkdtemp(prefix="h25-host-", dir="/tmp"))
    d.chmod(0o755)  # the sandbox's unprivileged host uid traverses it to its scratch dir
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    yield d
    monkeypatch.undo()
    assert remove_tree(d) == ""


def limits_of(**kw):
    """A stand-in for bwrap.TreeLimits whose workspace limits are `kw` (the rest as shipped)."""

    class Limits(TreeLimits):
        @classmethod
        def for_workspace(cls, workspace_mb: int, **more) -> TreeLimits:
            return TreeLimits(**{"max_bytes": workspace_mb << 20, **kw, **more})

    return Limits


def attack(name, scripts, proxy, store, cfg=BWRAP, idx=0):
    harness = CommandAdapter(f"sh {scripts}/{name}.sh", ro=(scripts,))
    job = RolloutJob(TASK, f"command:{name}", f"g-{name}", idx)
    opts = RunOptions(sandbox_cfg=cfg, max_turns=3, harness_timeout_s=120.0, start_retries=2)
    return run_rollout(job, harness, LocalProxy(proxy), store, opts)


def outcome(rec):
    return rec.status, rec.reward, rec.meta.get("attempts"), rec.meta.get("workspace_limit")


@pytest.mark.parametrize("name, limit, cfg", [
    ("deep_tree", "depth", BWRAP),
    ("long_names", "path", BWRAP),
    ("sparse_huge", "bytes", SandboxConfig(type="bwrap", workspace_mb=16)),
])
def test_a_shape_past_a_limit_is_scored_zero_once_and_leaves_nothing(scripts, proxy, store, host_tmp, name, limit,
                                                                     cfg):
    rec = attack(name, scripts, proxy, store, cfg)
    assert outcome(rec) == ("workspace_limit", 0.0, 1, limit), rec.error
    assert f"workspace limit ({limit})" in rec.error and rec.call_count == 1
    assert os.listdir(host_tmp) == []  # no scratch dir, no copy left on the host
    assert outcome(attack("honest", scripts, proxy, store, idx=1)) == ("ok", 1.0, 1, None)  # the host is fine


@pytest.mark.parametrize("name", ["hard_links", "sparse"])
def test_links_and_holes_keep_their_shape_in_the_verifiers_copy(scripts, proxy, store, host_tmp, name):
    rec = attack(name, scripts, proxy, store)
    assert outcome(rec) == ("ok", 1.0, 1, None), rec.error
    assert rec.checks == {"out": 1.0, "small": 1.0}  # not 21 MiB of copies, not 8 MiB of zeros
    assert os.listdir(host_tmp) == []


def test_many_files_are_copied_within_the_limits_or_refused_past_them(scripts, proxy, store, host_tmp, monkeypatch):
    rec = attack("many_files", scripts, proxy, store)
    assert outcome(rec) == ("ok", 1.0, 1, None), rec.error
    monkeypatch.setattr(bwrap, "TreeLimits", limits_of(max_entries=10_000))
    assert outcome(attack("many_files", scripts, proxy, store, idx=1)) == ("workspace_limit", 0.0, 1, "entries")
    # the deadline: the host stops copying when its time is spent, whatever the count
    monkeypatch.setattr(bwrap, "TreeLimits", limits_of(deadline_s=0.05))
    assert outcome(attack("many_files", scripts, proxy, store, idx=2)) == ("workspace_limit", 0.0, 1, "time")
    assert os.listdir(host_tmp) == []


def test_a_stale_scratch_dir_never_breaks_preflight(host_tmp, monkeypatch):
    """The dead owner's scratch dir with the deep tree the runner once left behind is swept; one that
    cannot be removed is renamed, reported and skipped: preflight still passes, every time."""
    import subprocess

    child = subprocess.Popen(["true"])
    child.wait()
    deep = host_tmp / f"{bwrap.SCRATCH_PREFIX}{child.pid}-deep"
    deep.mkdir()
    subprocess.run(["sh", "-c", MKDEEP.format(n=3000, name="d")], cwd=deep, check=True)
    for _ in range(10):  # a sweep has a time budget; the next one goes on where it stopped
        preflight(BWRAP)
        if not os.listdir(host_tmp):
            break
    assert os.listdir(host_tmp) == []  # gone, never renamed stale
    stuck = host_tmp / f"{bwrap.SCRATCH_PREFIX}{child.pid}-stuck"
    stuck.mkdir()
    monkeypatch.setattr(bwrap_start, "remove_tree", lambda path, **kw: f"{path}: Operation not permitted" if
                        "stuck" in str(path) else remove_tree(path, **kw))
    preflight(BWRAP)
    preflight(BWRAP)
    assert os.listdir(host_tmp) == [f"{bwrap.STALE_PREFIX}{child.pid}-stuck"]
    monkeypatch.undo()
    assert remove_tree(host_tmp / f"{bwrap.STALE_PREFIX}{child.pid}-stuck") == ""


# --- the property: random trees made inside a sandbox, through the verifier's copy path ----------

PROPERTY_LIMITS = dict(max_entries=30, max_depth=6, max_path_bytes=200, max_bytes=3 << 20)
BUILD = """\
import json, os, sys
for op in json.load(sys.stdin):
    kind, path = op[0], op[1]
    try:
        if kind == "dir": os.mkdir(path)
        elif kind == "file":
            with open(path, "wb") as f:
                f.write(b"x" * op[2])
        elif kind == "sparse":
            with open(path, "wb") as f:
                f.truncate(op[2])
        elif kind == "link": os.link(op[2], path)
        elif kind == "symlink": os.symlink(op[2], path)
        elif kind == "fifo": os.mkfifo(path)
        elif kind == "chmod": os.chmod(path, op[2])
    except OSError as e:
        print("skip", op, e, file=sys.stderr)
"""
names = st.one_of(st.sampled_from(["a", "b", "data", ".hidden", "with space", "ünï"]),
                  st.text("xyz-_.", min_size=1, max_size=60).filter(lambda s: s not in (".", "..")))


@st.composite
def trees(draw):
    """Build operations for a tree: nested dirs, files, sparse files, hard links, symlinks (inside,
    outside, dangling), fifos and unreadable modes; sometimes past PROPERTY_LIMITS."""
    dirs, files, used, ops = [""], [], set(), []
    shape = draw(st.sampled_from(["mixed", "deep", "long names", "many"]))
    if shape == "deep":  # a chain of directories first
        for i in range(draw(st.integers(3, 9))):
            dirs.append(posixpath.join(dirs[-1], "d") if i else "d")
            ops.append(["dir", dirs[-1]])
            used.add(dirs[-1])
    if shape == "long names":
        for i in range(draw(st.integers(1, 4))):
            dirs.append(posixpath.join(dirs[-1], "L" * 60) if i else "L" * 60)
            ops.append(["dir", dirs[-1]])
            used.add(dirs[-1])
    if shape == "many":
        for i in range(draw(st.integers(20, 40))):
            ops.append(["file", f"many{i}", 0])
            used.add(f"many{i}")
    for _ in range(draw(st.integers(1, 60))):
        parent = draw(st.sampled_from(dirs[-3:] if draw(st.booleans()) else dirs))  # often deeper
        path = posixpath.join(parent, draw(names)) if parent else draw(names)
        if path in used:  # (a file written over a fifo made earlier would block the build)
            continue
        used.add(path)
        kind = draw(st.sampled_from(["dir"] * 4 + ["file", "file", "sparse", "link", "symlink", "fifo"]))
        if kind == "link" and not files:
            kind = "file"
        if kind == "dir":
            dirs.append(path)
            ops.append(["dir", path])
            continue
        if kind == "file":
            ops.append(["file", path, draw(st.sampled_from([0, 10, 4096, 100_000]))])
        elif kind == "sparse":
            ops.append(["sparse", path, draw(st.sampled_from([64 << 10, 1 << 20, 4 << 20]))])
        elif kind == "link":
            ops.append(["link", path, draw(st.sampled_from(files))])
        elif kind == "symlink":
            ops.append(["symlink", path, draw(st.sampled_from(["a", "../../..", "/etc/passwd", "nowhere"]))])
        else:
            ops.append(["fifo", path])
        if kind in ("file", "sparse", "link"):
            files.append(path)
    if draw(st.integers(0, 3)) == 3 and len(dirs) > 1:  # a directory its owner cannot read
        ops.append(["chmod", draw(st.sampled_from(dirs[1:])), 0])
    return ops


def passed_limits(root: Path, limits: TreeLimits) -> set[str]:
    """The limits the tree at `root` passes, counted independently of the copy (empty: none).
    Which one a copy names first depends on the order it meets the entries."""
    passed, entries, total, inodes = set(), 0, 0, set()
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            s = os.lstat(path)
            if not (stat.S_ISREG(s.st_mode) or stat.S_ISDIR(s.st_mode) or stat.S_ISLNK(s.st_mode)):
                continue  # fifos, sockets, devices: left out of the copy, never counted (sandbox/snapshot.py)
            entries += 1
            if stat.S_ISREG(s.st_mode) and (s.st_dev, s.st_ino) not in inodes:
                inodes.add((s.st_dev, s.st_ino))
                total += s.st_size
            elif stat.S_ISLNK(s.st_mode):
                total += SYMLINK_COST
            checks = {"entries": entries > limits.max_entries, "depth": rel.count("/") + 1 > limits.max_depth,
                      "path": len(os.fsencode(rel)) > limits.max_path_bytes,
                      "bytes": limits.max_bytes is not None and total > limits.max_bytes}
            passed |= {k for k, hit in checks.items() if hit}
    return passed


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(ops=trees())
def test_property_any_tree_is_copied_or_refused_as_the_workspaces_and_leaves_nothing(ops, host_tmp, monkeypatch):
    monkeypatch.setattr(bwrap, "TreeLimits", limits_of(**PROPERTY_LIMITS))
    sb = make_sandbox(BWRAP)
    try:
        res = sb.run(["python3", "-c", BUILD], stdin=json.dumps(ops), timeout_s=60)
        assert res.ok, res.stderr
        try:
            view = fresh_view(sb)
        except WorkspaceLost as e:  # refused: the workspace's doing, scored 0 by the runner
            fault = sb.workspace_fault
            if isinstance(e, WorkspaceLimitExceeded) or fault is not None:
                assert fault is not None and fault.limit in ("entries", "depth", "path", "bytes")
            elif isinstance(e, WorkspaceLinkRefused):  # a link out of the workspace (issue 39)
                assert any(op[0] == "symlink" and op[2] in ("../../..", "/etc/passwd") for op in ops), str(e)
            else:  # tar inside could not read a dir its owner made unreadable
                assert any(op[0] == "chmod" for op in ops), str(e)
        else:
            with view:
                assert sb.workspace_fault is None
                got = view.run(["sh", "-c", "find . -type f | wc -l; find . -type p | wc -l"]).stdout.split()
                assert got[1] == "0"  # fifos never reach the verifier
                used = view.run(["python3", "-c", "import os; v = os.statvfs('.'); "
                                 "print((v.f_blocks - v.f_bfree) * v.f_frsize)"]).stdout
                assert int(used) <= PROPERTY_LIMITS["max_bytes"] + (1 << 20)  # bounded disk: holes, links kept
        if any(op[0] == "chmod" for op in ops):
            event("with an unreadable dir")
        else:  # scored-or-copied exactly as the limits say
            passed = passed_limits(sb.workspace, TreeLimits(**PROPERTY_LIMITS))
            fault = sb.workspace_fault
            event(f"refused: {fault.limit}" if fault else "copied")
            assert (fault is None) == (not passed) and (fault is None or fault.limit in passed), (fault, passed)
    finally:
        sb.destroy()
    assert os.listdir(host_tmp) == []  # nothing of the sandbox, its copy or the view stays on the host
