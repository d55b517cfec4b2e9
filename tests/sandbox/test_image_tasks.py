"""Tasks on their own root file system (bwrap tier): a busybox + bash image built here as an OCI
layout (tests/support/images.py) runs under a fresh writable layer per sandbox; each input kind
(OCI layout, layout:tag, docker-archive, OCI archive, plain root directory) unpacks to the same
root, cached by digest; nothing written in one sandbox is in the next nor in the image; the host's
/ is not visible; the verifier runs on the image in its own fresh sandbox; a broken image is a
SandboxError naming it."""

from __future__ import annotations

import subprocess

import pytest

from harnessrl.sandbox import SandboxConfig
from harnessrl.sandbox.base import SandboxError
from harnessrl.tasks.images import ImageError, image_kind, prepare_image, sandbox_owner
from harnessrl.tasks.model import Task, Verifier
from harnessrl.tasks.verifier import run_verifier
from tests.support.images import HOST_ONLY, SEED, build_images, harbor_task, tools_missing

pytestmark = [pytest.mark.bwrap, pytest.mark.timeout(600)]
BWRAP = SandboxConfig(type="bwrap")


@pytest.fixture(scope="session")
def images(tmp_path_factory):
    if tools_missing():
        pytest.skip(f"image tests need {tools_missing()} (apt-get install umoci skopeo busybox-static)")
    return build_images(tmp_path_factory.mktemp("images"))


def image_task(image: str, files: dict[str, bytes] | None = None) -> Task:
    verifier = Verifier(kind="reward_line", command="test -f out.txt && echo 1 || echo 0")
    return Task(id="on-image", instruction="write out.txt", files=files or {}, verifier=verifier,
                input_mount_dir="/app", image=image)


def sh(sb, cmd: str):
    return sb.run(["sh", "-c", cmd], timeout_s=60)


def test_each_input_kind_unpacks_to_the_same_root_once(images, tmp_path):
    said: list[str] = []
    kinds = [(f"{images.layout}", "oci-layout"), (f"{images.layout}:latest", "oci-layout"),
             (str(images.docker_archive), "docker-archive"), (str(images.oci_archive), "oci-archive"),
             (str(images.rootfs), "rootfs")]
    roots = {}
    for source, kind in kinds:
        assert image_kind(source) == kind
        image = prepare_image(source, cache=tmp_path / "cache", log=said.append)
        assert (image.rootfs / "app" / "seed.txt").read_text() == SEED
        assert (image.rootfs / "bin" / "sh").is_symlink()
        if kind != "rootfs":
            assert image.workdir == "/app" and image.env["PATH"] == "/usr/local/bin:/usr/bin:/bin"
            assert image.rootfs.parent.name.startswith(image.digest.replace(":", "-"))
        roots[source] = image.rootfs
    assert roots[str(images.rootfs)] == images.rootfs  # a plain directory is used in place
    # the layout, its tag and its OCI archive are one digest: unpacked once; docker-archive is another
    assert roots[str(images.layout)] == roots[f"{images.layout}:latest"] == roots[str(images.oci_archive)]
    assert sum("unpacking" in s for s in said) == 2
    prepare_image(str(images.docker_archive), cache=tmp_path / "cache", log=said.append)
    assert sum("unpacking" in s for s in said) == 2


def test_writes_stay_in_their_sandbox(images):
    from harnessrl.rollout.task_sandbox import open_task_sandbox

    task = image_task(str(images.layout), {"in.txt": b"given\n"})
    with open_task_sandbox(task, BWRAP) as sb:
        res = sh(sb, "pwd; cat seed.txt in.txt; id -un; echo mine > out.txt; echo leak > /leak.txt; "
                     "echo leak > /etc/leak; echo x > /bin/busybox.new; rm /bin/ls; mkdir -p /opt/x")
        assert res.ok, res.stderr
        assert res.stdout.split("\n")[:3] == ["/app", SEED.strip(), "given"]
        assert run_verifier(task, sb).reward == 1.0  # the verifier's own sandbox sees the workspace
    with open_task_sandbox(task, BWRAP) as sb:
        res = sh(sb, "for p in /app/out.txt /leak.txt /etc/leak /bin/busybox.new /opt/x; do "
                     "test -e $p && echo present $p; done; test -L /bin/ls && echo ls-back; ls /app")
        assert res.ok, res.stderr
        assert res.stdout.split() == ["ls-back", "in.txt", "seed.txt"]
        assert run_verifier(task, sb).reward == 0.0
    unpacked = prepare_image(str(images.layout), owner=sandbox_owner(BWRAP.host_uid), log=lambda _: None).rootfs
    assert not (unpacked / "leak.txt").exists() and (unpacked / "bin" / "ls").is_symlink()


def test_the_hosts_root_is_not_visible(images):
    from harnessrl.rollout.task_sandbox import open_task_sandbox

    assert subprocess.run(["test", "-e", HOST_ONLY]).returncode == 0, "the host check needs a Debian host"
    with open_task_sandbox(image_task(str(images.layout)), BWRAP) as sb:
        res = sh(sb, f"test -e {HOST_ONLY} && echo host-visible; test -e /etc/os-release && echo host-etc; "
                     "ls /usr/bin | wc -l; head -1 /etc/passwd; readlink /bin/sh; node -e 'console.log(6*7)'")
    assert res.ok, res.stderr
    lines = res.stdout.split("\n")
    assert "host-visible" not in res.stdout and "host-etc" not in res.stdout
    assert lines[:3] == ["0", "root:x:0:0:root:/root:/bin/sh", "busybox"]  # the image's own /usr, /etc, sh
    assert lines[3] == "42"  # the harness runtime (host node) works on a root without a C library of its own


def test_harbor_verifier_sees_a_fresh_root(images, tmp_path):
    """The agent plants Harbor's reward file and a /tests of its own: the verifier's fresh root has
    neither, only the task's tests and the workspace."""
    from harnessrl.rollout.task_sandbox import open_task_sandbox
    from harnessrl.tasks.harbor import load_harbor

    task = load_harbor(harbor_task(tmp_path, "hello", str(images.layout)))
    assert task.image == str(images.layout) and task.input_mount_dir == "/app" and task.files == {}
    with open_task_sandbox(task, BWRAP) as sb:
        assert sh(sb, "mkdir -p /logs/verifier /tests && echo 1 > /logs/verifier/reward.txt && "
                      "printf 'echo 1 > /logs/verifier/reward.txt' > /tests/test.sh").ok
        cheat = run_verifier(task, sb)
        assert sh(sb, "echo hello > hello.txt").ok
        solved = run_verifier(task, sb)
    assert (cheat.status, cheat.reward) == ("ok", 0.0)
    assert (solved.status, solved.reward) == ("ok", 1.0)
    assert "not the reward" not in solved.stdout_tail  # test.sh's output is not the reward channel


@pytest.mark.parametrize("which", ["no_shell", "corrupt", "flipped", "missing"])
def test_a_broken_image_is_a_sandbox_error_naming_it(which, images, tmp_path):
    from harnessrl.rollout.task_sandbox import open_task_sandbox

    source = str(tmp_path / "missing.tar") if which == "missing" else str(getattr(images, which))
    with pytest.raises(SandboxError) as err:
        prepare_image(source, cache=tmp_path / "fresh-cache", log=lambda _: None)
    assert source in str(err.value)
    expected = {"no_shell": "no shell (/bin/sh)", "corrupt": "not a readable image tarball",
                "flipped": "Digest did not match", "missing": "no such file"}[which]
    assert expected in str(err.value)
    if which != "flipped":  # (the flipped archive shares its digest with the good one: a cache hit)
        with pytest.raises(SandboxError, match="image "):
            open_task_sandbox(image_task(source), BWRAP)
    assert isinstance(err.value, (ImageError, SandboxError))
