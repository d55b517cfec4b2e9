"""The harness runtime on an image whose C library it cannot use (bwrap tier): the busybox + bash
image (tests/support/images.py) with its loader and libc replaced by files that are no library, as
an image with an older glibc than the host's is to the host's interpreter. The harness launcher's
interpreter still starts (on the host's loader and libraries, sandbox/rootfs.py RUNTIME_LIB) and
imports its extension module, the image's static busybox still runs, and a program that loads the
image's libc (the image's bash, moved off /bin) gets the image's broken one: the host's libraries are not put
under the image's own programs. Four sandboxes starting together on a new image unpack it once."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harnessrl.sandbox import SandboxConfig
from harnessrl.sandbox.rootfs import RUNTIME_LIB, elf_interpreter, host_loaded_argv
from harnessrl.tasks.model import Task, Verifier
from tests.support import images as support

pytestmark = [pytest.mark.bwrap, pytest.mark.timeout(600)]
NOT_A_LIBRARY = b"not a shared library\n"


def _broken_libc(root: Path) -> None:
    support._fill_rootfs(root)
    (root / "usr" / "local" / "bin").mkdir(parents=True)
    (root / "bin" / "bash").rename(root / "usr" / "local" / "bin" / "dynbash")  # (no bash keeper)
    loader = elf_interpreter(str(root / "usr" / "local" / "bin" / "dynbash"))
    assert loader, "bash names a loader"
    libc = [p for p in (root / "lib").rglob("libc.so.6")]
    assert libc, "bash's libc was copied into the image"
    for path in [root / loader.lstrip("/"), *libc]:
        path.unlink()
        path.write_bytes(NOT_A_LIBRARY)


@pytest.fixture(scope="module")
def broken(tmp_path_factory) -> str:
    if support.tools_missing():
        pytest.skip(f"image tests need {support.tools_missing()} (apt-get install umoci skopeo busybox-static)")
    return str(support._layout(tmp_path_factory.mktemp("broken-libc"), _broken_libc))


def test_the_interpreter_runs_on_the_hosts_loader_over_an_unusable_libc(broken):
    from harnessrl.rollout.task_sandbox import open_task_sandbox

    task = Task(id="libc", instruction="-", files={}, input_mount_dir="/app", image=broken,
                verifier=Verifier(kind="reward_line", command="echo 0"))
    with open_task_sandbox(task, SandboxConfig(type="bwrap")) as sb:
        py = sb.run([sys.executable, "-IS", "-c", "import ctypes, os, sys; print(sys.version_info[0], os.getcwd())"],
                    timeout_s=60)
        busybox = sb.run(["sh", "-c", "echo static; cat /app/seed.txt"], timeout_s=60)
        bash = sb.run(["/usr/local/bin/dynbash", "-c", "echo dynamic"], timeout_s=60)
    assert py.returncode == 0, py.stderr
    assert py.stdout.split() == ["3", "/app"]
    assert busybox.returncode == 0 and busybox.stdout.split() == ["static", support.SEED.strip()]
    assert bash.returncode != 0 and "dynamic" not in bash.stdout  # the image's own libc, broken


def test_only_this_interpreter_is_started_on_the_hosts_loader():
    exe = sys.executable
    loader = elf_interpreter(str(Path(exe).resolve()))
    assert loader and Path(loader).name.startswith("ld-")
    assert host_loaded_argv([exe, "-IS", "-c", "pass"]) == [
        f"{RUNTIME_LIB}/{Path(loader).name}", "--library-path", RUNTIME_LIB, exe, "-IS", "-c", "pass"]
    for argv in (["sh", "-c", "true"], ["/bin/sh"], ["python3", "-c", "pass"], []):
        assert host_loaded_argv(argv) == argv
    assert elf_interpreter(str(Path(shutil.which("busybox") or "/bin/busybox").resolve())) is None  # static
    assert elf_interpreter(__file__) is None
    assert subprocess.run([elf_interpreter(str(Path(exe).resolve())) or "", "--library-path", "/nonexistent",
                           exe, "-IS", "-c", "print(7)"], capture_output=True, text=True).stdout == "7\n"


def test_rollouts_starting_together_on_a_new_image_unpack_it_once(broken, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from harnessrl.tasks.images import prepare_image

    said: list[str] = []
    with ThreadPoolExecutor(4) as pool:
        roots = list(pool.map(lambda _: prepare_image(broken, cache=tmp_path, log=said.append).rootfs, range(4)))
    assert len(set(roots)) == 1 and (roots[0] / "app" / "seed.txt").is_file()
    assert sum("unpacking" in s for s in said) == 1, said
