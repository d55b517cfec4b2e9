"""Small task images built on this box from Debian packages (busybox-static, bash), for the image
task tests: an OCI layout made with umoci (init, new, unpack, add files, repack, config), the same
image as `docker save`-style and OCI archives (skopeo copy), a plain root directory, an image without
a shell, a corrupt tarball, and a Harbor task directory on the image."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

SEED = "hello-from-image\n"  # /app/seed.txt in the image
HOST_ONLY = "/var/lib/dpkg/status"  # on the Debian host, never in the image
TEST_SH = """#!/bin/bash
if [ "$(tr -d '[:space:]' < /app/hello.txt 2>/dev/null)" = hello ] && [ -f /tests/test.sh ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
echo "a line of test output that is not the reward"
"""
INSTRUCTION = "Create the file hello.txt that contains the word hello. Run this command:\necho hello > hello.txt\n"


@dataclass(frozen=True)
class Images:
    layout: Path  # OCI layout, one tag: latest
    docker_archive: Path
    oci_archive: Path
    rootfs: Path  # a plain root directory
    no_shell: Path  # OCI layout without /bin/sh
    corrupt: Path  # a truncated docker-archive
    flipped: Path  # an OCI archive with a damaged layer blob


def tools_missing() -> str:
    missing = [t for t in ("umoci", "skopeo", "busybox", "bash", "ldd") if shutil.which(t) is None]
    return ", ".join(missing)


def _run(*argv: str) -> None:
    subprocess.run(list(argv), check=True, capture_output=True, timeout=300)


def _fill_rootfs(root: Path) -> None:
    for d in ("bin", "etc", "app", "tmp", "root", "usr/bin"):
        (root / d).mkdir(parents=True, exist_ok=True)
    busybox = Path(shutil.which("busybox") or "/bin/busybox").resolve()
    shutil.copy2(busybox, root / "bin" / "busybox")
    applets = subprocess.run([str(busybox), "--list"], capture_output=True, text=True, check=True).stdout.split()
    for name in applets:
        if name != "busybox" and not (root / "bin" / name).exists():
            (root / "bin" / name).symlink_to("busybox")
    bash = Path(shutil.which("bash") or "/bin/bash").resolve()
    shutil.copy2(bash, root / "bin" / "bash")
    ldd = subprocess.run(["ldd", str(bash)], capture_output=True, text=True, check=True).stdout
    for line in ldd.splitlines():
        words = line.split()
        lib = words[2] if len(words) >= 3 and words[1] == "=>" else words[0] if words else ""
        if lib.startswith("/"):
            (root / lib.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(Path(lib).resolve(), root / lib.lstrip("/"))
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    (root / "etc" / "group").write_text("root:x:0:\n")
    (root / "app" / "seed.txt").write_text(SEED)


def _layout(where: Path, fill) -> Path:
    layout, bundle = where / "layout", where / "bundle"
    _run("umoci", "init", "--layout", str(layout))
    _run("umoci", "new", "--image", f"{layout}:latest")
    _run("umoci", "unpack", "--rootless", "--image", f"{layout}:latest", str(bundle))
    fill(bundle / "rootfs")
    _run("umoci", "repack", "--image", f"{layout}:latest", str(bundle))
    _run("umoci", "config", "--image", f"{layout}:latest", "--config.workingdir", "/app",
         "--config.env", "PATH=/usr/local/bin:/usr/bin:/bin")
    shutil.rmtree(bundle)
    return layout


def build_images(where: Path) -> Images:
    where.mkdir(parents=True, exist_ok=True)
    layout = _layout(where / "busybox", _fill_rootfs)
    docker = where / "busybox.docker.tar"
    oci = where / "busybox.oci.tar"
    _run("skopeo", "copy", "--quiet", f"oci:{layout}:latest", f"docker-archive:{docker}:busybox:latest")
    _run("skopeo", "copy", "--quiet", f"oci:{layout}:latest", f"oci-archive:{oci}")
    rootfs = where / "rootfs"
    rootfs.mkdir()
    _fill_rootfs(rootfs)
    no_shell = _layout(where / "noshell", lambda root: (root / "app").mkdir() or (root / "app" / "x").write_text("x"))
    corrupt = where / "corrupt.tar"
    corrupt.write_bytes(docker.read_bytes()[:20000])
    data = bytearray(oci.read_bytes())
    middle = len(data) // 2
    data[middle:middle + 64] = bytes(b ^ 0xFF for b in data[middle:middle + 64])
    flipped = where / "flipped.oci.tar"
    flipped.write_bytes(bytes(data))
    return Images(layout, docker, oci, rootfs, no_shell, corrupt, flipped)


def harbor_task(root: Path, name: str, image: str | None, solution: bool = True,
                dockerfile: bool = False) -> Path:
    """A Harbor task directory: hello.txt must hold "hello"; ``image`` is written as [environment]
    docker_image (None: none; ``dockerfile`` adds environment/Dockerfile)."""
    d = root / name
    (d / "tests").mkdir(parents=True)
    (d / "environment").mkdir()
    env = f'docker_image = "{image}"\n' if image else ""
    (d / "task.toml").write_text('version = "1.0"\n\n[metadata]\ncategory = "file-ops"\n\n[verifier]\n'
                                 f'timeout_sec = 60.0\n\n[agent]\ntimeout_sec = 120.0\n\n[environment]\n{env}')
    (d / "instruction.md").write_text(INSTRUCTION)
    (d / "tests" / "test.sh").write_text(TEST_SH)
    if solution:
        (d / "solution").mkdir()
        (d / "solution" / "solve.sh").write_text("#!/bin/bash\necho hello > hello.txt\n")
    if dockerfile:
        (d / "environment" / "Dockerfile").write_text("FROM busybox\nWORKDIR /app\n")
    return d
