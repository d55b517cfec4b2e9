"""Links in agent-made trees, resolved against the tree's root alone (issue 39, items 1 and 5; unit tier,
no sandbox): the host copy checks every link against the FINAL tree whatever the order of the archive
(tarcopy.safe_members), and the verifier's copy refuses a link into the verifier's files or out of the
workspace (views.vet_links). Each vector has a control: the code as it was (links checked against the
links before them) or the check turned off lets it through. The property test generates link graphs,
writes them as archives in random orders and checks every path of the result with the real kernel."""

from __future__ import annotations

import io
import os
import posixpath
import shutil
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from harnessrl.sandbox.links import HostTree, resolve, split
from harnessrl.sandbox.tarcopy import collect_skipped, extract_safely, safe_members
from harnessrl.sandbox.views import WorkspaceLinkRefused, vet_links

MOUNT = "/workspace"
TRUSTED = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}


def archive(members: list[tuple[str, str, str]]) -> tarfile.TarFile:
    """An in-memory tar of (name, kind, data) in this order: kind file (data: content), dir, sym
    (data: target) or hard (data: the member it links)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, kind, data in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(data.encode())
                tar.addfile(info, io.BytesIO(data.encode()))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE}[kind]
            info.mode = 0o755 if kind == "dir" else 0o644
            info.linkname = data if kind in ("sym", "hard") else ""
            tar.addfile(info)
    buf.seek(0)
    return tarfile.open(fileobj=buf)


def kept(members: list[tuple[str, str, str]]) -> set[str]:
    return {posixpath.normpath(m.name) for m in safe_members(archive(members))}


def old_safe_members(tar: tarfile.TarFile) -> list[str]:
    """safe_members before issue 39 (the control): a link checked only against the links kept before it."""
    def through(path: str, links: set[str]) -> bool:
        cur: list[str] = []
        for part in path.split("/"):
            if part in ("", "."):
                continue
            if part == "..":
                if cur:
                    cur.pop()
                continue
            cur.append(part)
            if "/".join(cur) in links:
                return True
        return False

    def inside(path: str) -> bool:
        norm = posixpath.normpath(path)
        return not posixpath.isabs(path) and norm != ".." and not norm.startswith("../")

    keep, links = [], set()
    for m in tar.getmembers():
        ok = inside(m.name) and not through(posixpath.dirname(m.name), links)
        if ok and m.issym():
            target = posixpath.join(posixpath.dirname(m.name), m.linkname)
            ok = inside(target) and not through(target + "/x", links)
        if ok:
            if m.issym():
                links.add(posixpath.normpath(m.name))
            keep.append(posixpath.normpath(m.name))
    return keep


# p resolves to the parent of the host copy once q -> . exists, whichever comes first in the archive
ORDER_ESCAPE = [("p", "sym", "q/.."), ("q", "sym", ".")]
CLIMB = [("a", "sym", "b/.."), ("b", "sym", "c/.."), ("c", "sym", "d"), ("d", "dir", ""), ("d/f", "file", "x")]


def test_a_link_is_checked_against_the_final_tree_not_the_archive_order(tmp_path):
    tar = archive(ORDER_ESCAPE)  # control: the old check kept both, and p is the copy's parent
    assert old_safe_members(tar) == ["p", "q"]
    (tmp_path / "old").mkdir()
    for m in tar.getmembers():
        tar.extract(m, tmp_path / "old", set_attrs=False, **TRUSTED)
    assert Path(os.path.realpath(tmp_path / "old" / "p")) == tmp_path.resolve()
    for order in (ORDER_ESCAPE, ORDER_ESCAPE[::-1]):
        assert kept(order) == {"q"}
        (tmp_path / "new").mkdir()
        extract_safely(archive(order), tmp_path / "new")
        assert not os.path.lexists(tmp_path / "new" / "p") and os.readlink(tmp_path / "new" / "q") == "."
        os.unlink(tmp_path / "new" / "q")
        (tmp_path / "new").rmdir()


def test_a_longer_chain_that_climbs_is_refused_in_any_order():
    for order in (CLIMB, CLIMB[::-1], CLIMB[2:] + CLIMB[:2]):
        got = kept(order)
        assert "d/f" in got and "c" in got
        assert got == kept(CLIMB)  # the same answer whatever the order


def test_members_through_a_link_and_hard_links_through_one_are_skipped_whatever_the_order():
    tree = [("a", "sym", "sub"), ("sub", "dir", ""), ("a/x", "file", "x"), ("h", "hard", "a/y"),
            ("sub/y", "file", "y"), ("g", "hard", "sub/y"), ("e", "hard", "nothere")]
    for order in (tree, tree[::-1]):
        assert kept(order) == {"a", "sub", "sub/y", "g"}


def test_skipped_members_are_reported_to_whoever_collects_them():
    with collect_skipped() as skipped:
        safe_members(archive([("out", "sym", "/etc/passwd"), ("up", "sym", "../x"), ("f", "file", "1")]))
    assert {(s["name"], s["type"], s["linkname"]) for s in skipped} == {
        ("out", "symlink", "/etc/passwd"), ("up", "symlink", "../x")}
    safe_members(archive([("out", "sym", "/etc/passwd")]))  # outside the block nothing is collected
    assert len(skipped) == 2


def workspace(tmp_path: Path, links: dict[str, str], files: tuple[str, ...] = ("answer.txt", "d/in.txt")) -> Path:
    root = tmp_path / "copy"
    for f in files:
        (root / f).parent.mkdir(parents=True, exist_ok=True)
        (root / f).write_text("agent\n")
    for name, target in links.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, root / name)
    return root


@pytest.mark.parametrize("target, reaches", [
    (".verifier/expected.txt", "verifier_files"), ("d/../.verifier/expected.txt", "verifier_files"),
    ("/workspace/.verifier/expected.txt", "verifier_files"), ("./.verifier", "verifier_files"),
    ("../etc/passwd", "outside"), ("/tmp/expected", "outside"), ("/proc/self/cwd/expected.txt", "outside"),
    ("/logs/verifier/reward.txt", "outside"), ("/tests/expected.txt", "outside"),
    ("/usr/../proc/self/environ", "outside"), ("/workspace/../etc", "outside"),
])
def test_a_link_into_the_verifiers_files_or_out_is_refused(tmp_path, target, reaches):
    root = workspace(tmp_path, {"sorted.txt": target})
    with pytest.raises(WorkspaceLinkRefused) as e:
        vet_links(root, MOUNT, [".verifier"])
    assert (e.value.path, e.value.target, e.value.reaches) == ("sorted.txt", target, reaches)


def test_a_chain_into_the_verifiers_files_is_refused(tmp_path):
    root = workspace(tmp_path, {"a": "b/expected.txt", "b": "c", "c": "/workspace/d/../.verifier"})
    with pytest.raises(WorkspaceLinkRefused, match="into the verifier's files"):
        vet_links(root, MOUNT, [".verifier"])


def test_links_inside_stay_dangling_ones_go_absolute_ones_become_relative(tmp_path):
    root = workspace(tmp_path, {"in": "d/in.txt", "dirlink": "d", "abs": "/workspace/d/in.txt",
                                "venv/bin/python": "/usr/bin/python3", "gone": "nothere", "loop": "loop",
                                "d/up": "../answer.txt"})
    counts = vet_links(root, MOUNT, [".verifier"])
    assert counts["removed"] == 2 and not os.path.lexists(root / "gone") and not os.path.lexists(root / "loop")
    assert os.readlink(root / "abs") == "d/in.txt" and (root / "abs").read_text() == "agent\n"
    assert os.readlink(root / "in") == "d/in.txt" and os.readlink(root / "d/up") == "../answer.txt"
    assert os.readlink(root / "venv/bin/python") == "/usr/bin/python3"  # a read-only system file: kept


def test_a_dangling_link_that_could_reach_the_verifiers_files_later_is_refused(tmp_path):
    root = workspace(tmp_path, {"a": "made_later/../.verifier/expected.txt"})
    with pytest.raises(WorkspaceLinkRefused, match="verifier"):
        vet_links(root, MOUNT, [".verifier"])


def test_links_the_copy_out_dropped_are_judged_too(tmp_path):
    """bwrap's copy-out drops absolute links (safe_members has no mount path): one into the workspace
    comes back relative, one out of it is refused instead of vanishing unseen."""
    root = workspace(tmp_path, {})
    back = [{"name": "./ok", "type": "symlink", "linkname": "/workspace/answer.txt", "why": ""}]
    assert vet_links(root, MOUNT, [".verifier"], back)["restored"] == 1 and os.readlink(root / "ok") == "answer.txt"
    out = [{"name": "./sorted.txt", "type": "symlink", "linkname": "/workspace/.verifier/x", "why": ""}]
    with pytest.raises(WorkspaceLinkRefused, match="sorted.txt -> /workspace/.verifier/x"):
        vet_links(root, MOUNT, [".verifier"], out)


def test_the_tasks_own_links_are_kept_as_they_are(tmp_path):
    """An image's workspace may hold links out of it (a virtualenv, a data dir): the task's, not the agent's."""
    root = workspace(tmp_path, {"data": "/srv/data"})
    with pytest.raises(WorkspaceLinkRefused):
        vet_links(root, MOUNT, [".verifier"])
    assert vet_links(root, MOUNT, [".verifier"], given={"data": "/srv/data"})["links"] == 1
    root2 = workspace(tmp_path / "2", {"data": "/srv/other"})  # retargeted by the agent: its own link
    with pytest.raises(WorkspaceLinkRefused):
        vet_links(root2, MOUNT, [".verifier"], given={"data": "/srv/data"})


# --- the property: any link graph, any archive order ---------------------------------------------------

NAMES = ["a", "b", "c", "d/e", "d/f", "g/h"]
TARGETS = ["a", "b", "c", ".", "..", "../..", "d", "d/..", "b/..", "c/../..", "e", "../a", "../../x", "g/h/..",
           ".verifier", ".verifier/expected.txt", "../.verifier/expected.txt", "/workspace/.verifier",
           "/workspace/d", "/workspace/..", "/etc/passwd", "/tmp", "nothere/../..", "f/../../.verifier"]


@st.composite
def link_graphs(draw):
    """(members in archive order): a few dirs and files, links among the names with tricky targets."""
    kinds = {}
    for name in NAMES:
        kinds[name] = draw(st.sampled_from(["dir", "file", "sym", "sym", "absent"]))
    members: list[tuple[str, str, str]] = []
    for name, kind in kinds.items():
        if kind == "absent" or any(kinds.get(p) in ("file", "sym") for p in _prefixes(name)):
            continue
        members.append((name, kind, draw(st.sampled_from(TARGETS)) if kind == "sym" else "data" if kind == "file" else ""))
    perm = draw(st.permutations(list(range(len(members)))))
    return members, [members[i] for i in perm]


def _prefixes(name: str) -> list[str]:
    parts = name.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def kernel_path(p: Path) -> Path | None:
    """Where the kernel resolves `p` (None: nowhere, ENOENT or ELOOP): the ground truth."""
    try:
        fd = os.open(p, os.O_PATH)
    except OSError:
        return None
    try:
        return Path(os.readlink(f"/proc/self/fd/{fd}"))
    finally:
        os.close(fd)


def _every_path(root: Path) -> list[Path]:
    out = []
    for top, dirs, files in os.walk(root, followlinks=False):
        out += [Path(top) / n for n in dirs + files]
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(graph=link_graphs())
def test_property_no_resolved_path_escapes_or_reaches_the_verifiers_files(graph, tmp_path_factory):
    members, shuffled = graph
    assert kept(members) == kept(shuffled)  # the same tree whatever the archive's order
    root = tmp_path_factory.mktemp("g") / "copy"
    root.mkdir()
    with collect_skipped() as skipped:
        extract_safely(archive(shuffled), root)
    real = root.resolve()
    for p in _every_path(root):  # the host copy: nothing resolves out of it
        at = kernel_path(p)
        assert at is None or at.is_relative_to(real), (p, members)
    before = tmp_path_factory.mktemp("before") / "copy"
    shutil.copytree(root, before, symlinks=True)
    try:
        vet_links(root, MOUNT, [".verifier"], skipped)
    except WorkspaceLinkRefused as e:  # refused: the copy-out dropped it as leading out, or it leads
        dropped = {posixpath.normpath(m["name"]) for m in skipped}  # into .verifier or out
        r = resolve(HostTree(before), split(e.path)[:-1], e.target, mount=split(MOUNT),
                    protected=frozenset({(".verifier",)}))
        assert e.path in dropped or r.kind in ("protected", "outside") or r.could_escape or r.could_protect
        event(f"refused: {e.reaches}")
        return
    event("kept: links checked with the verifier's files in place")
    verifier = root / ".verifier"  # now mount the verifier's files where the view binds them
    verifier.mkdir()
    (verifier / "expected.txt").write_text("secret\n")
    for p in _every_path(root):
        if p == verifier or verifier in p.parents:
            continue
        at = kernel_path(p)
        assert at is None or at.is_relative_to(real), (p, os.readlink(p) if p.is_symlink() else "", members)
        assert at is None or not at.is_relative_to(verifier.resolve()), (p, members)
