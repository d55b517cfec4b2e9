"""No agent code after the harness (issue 39, bwrap tier): the copy-out of a sandbox on an image
runs nothing from the agent's writable layer, and it is a snapshot no process of the rollout still
writes to.

The attack: the harness replaces the image's ``/bin/sh`` and ``tar`` with a script that marks the
workspace and stalls. The control runs the old copy-out (``sh -c COPY_OUT`` inside): the planted
script runs, after the harness ended. The copy-out now reads the tree from the host side
(sandbox/snapshot.py), so the mark never appears and nothing stalls.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from harnessrl.rollout.task_sandbox import open_task_sandbox
from harnessrl.sandbox import SandboxConfig, make_sandbox
from harnessrl.tasks.model import Task, Verifier
from tests.support import images as support

pytestmark = [
    pytest.mark.bwrap,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bubblewrap: apt-get install bubblewrap"),
]

# the harness's move: /bin/sh and /bin/tar become a script that marks the workspace, then stalls
PLANT = r"""
printf '#!/bin/busybox sh\necho ran-after-the-harness >> /app/planted.txt\nsleep 3\nexec /bin/busybox "${0##*/}" "$@"\n' > /tmp/evil
chmod 755 /tmp/evil
for p in /bin/sh /bin/tar; do rm -f "$p" && cp /tmp/evil "$p"; done
echo done > /app/result.txt
"""
CFG = SandboxConfig(type="bwrap", memory_mb=512, max_procs=128)
# the copy-out as it was (the control): tar, through the image's own sh, inside the sandbox
COPY_OUT = (
    'S=; case "$(tar --version 2>/dev/null)" in *GNU*) S=--sparse;; esac; '
    'if [ -d "$1" ]; then exec tar -c $S -f - -C "$1" .; '
    'else exec tar -c $S -f - -C "$(dirname -- "$1")" -- "$(basename -- "$1")"; fi'
)


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> str:
    """A plain root directory (busybox + bash) owned by the sandbox's host uid, as an unpacked
    image is: the agent may rewrite any file of it in its own layer."""
    if os.geteuid() != 0:
        pytest.skip("a sandbox on an image root needs root (its writable layer is an overlay mount)")
    if shutil.which("busybox") is None or shutil.which("ldd") is None:
        pytest.skip("needs busybox (apt-get install busybox-static) and ldd")
    root = tmp_path_factory.mktemp("image") / "rootfs"
    root.mkdir()
    support._fill_rootfs(root)
    for path in [root, *root.rglob("*")]:
        os.chown(path, CFG.host_uid, CFG.host_uid, follow_symlinks=False)
    return str(root)


def _task(image: str) -> Task:
    return Task(id="plant", instruction="-", files={"in.txt": b"x\n"}, input_mount_dir="/app", image=image,
                verifier=Verifier(kind="reward_line", command="echo 0"))


def _plant(sb) -> None:
    res = sb.run(["/bin/busybox", "sh", "-c", PLANT], timeout_s=60)
    assert res.ok, res


def test_the_copy_out_runs_nothing_the_agent_planted_in_its_image(image, tmp_path):
    with open_task_sandbox(_task(image), CFG) as sb:
        _plant(sb)
        sb.copy_out("/app", tmp_path / "copy")
        inside = Path(sb.workspace)
        assert not (inside / "planted.txt").exists()  # the planted sh/tar never ran
    copy = sorted(p.name for p in (tmp_path / "copy").iterdir())
    assert copy == ["in.txt", "result.txt", "seed.txt"]
    assert (tmp_path / "copy" / "result.txt").read_text() == "done\n"


def test_control_the_old_copy_out_ran_the_agents_sh(image, tmp_path):
    """Defence off: the copy-out as it was, `sh -c COPY_OUT` inside the sandbox."""
    with open_task_sandbox(_task(image), CFG) as sb:
        _plant(sb)
        res = sb.run(["sh", "-c", COPY_OUT, "sh", "/app"], stdout_path=tmp_path / "out.tar", timeout_s=60)
        marks = (Path(sb.workspace) / "planted.txt").read_text()
    assert res.ok, res
    assert "ran-after-the-harness" in marks  # the image's sh, the agent's now, ran after the harness


DAEMON = "while :; do date +%s%N > tick; done"


def test_the_snapshot_is_taken_once_every_process_of_the_rollout_is_dead(tmp_path):
    with make_sandbox(CFG) as sb:
        assert sb.run(["sh", "-c", f"({DAEMON}) > /dev/null 2>&1 &"], keep_background=True).ok
        cg = sb._cgroups
        if cg is None:
            pytest.skip("no writable cgroups here")
        leaves = list(cg.pids_dir.glob("run-*"))
        assert any((d / "cgroup.procs").read_text().split() for d in leaves), "the daemon runs"  # control
        sb.copy_out(".", tmp_path / "copy")
        assert not any((d / "cgroup.procs").read_text().split() for d in leaves if d.exists())
        assert (tmp_path / "copy" / "tick").read_text() == (Path(sb.workspace) / "tick").read_text()


def test_the_copy_out_resolves_links_inside_the_sandbox_only(tmp_path):
    """The path named by the caller resolves as inside (an absolute link against the sandbox's /,
    not the host's); nothing below it is followed."""
    with make_sandbox(CFG) as sb:
        script = "mkdir d && echo in > d/f && ln -s /workspace/d top && ln -s /etc d/etc && ln -s /etc/passwd pw"
        assert sb.run(["sh", "-c", script]).ok
        sb.copy_out("top", tmp_path / "top")
        assert (tmp_path / "top" / "f").read_text() == "in\n"
        assert not (tmp_path / "top" / "etc").exists()  # a link out is not kept, never followed
        with pytest.raises(Exception) as e:
            sb.copy_out("nope", tmp_path / "nope")
        assert "no such file" in str(e.value).lower()
