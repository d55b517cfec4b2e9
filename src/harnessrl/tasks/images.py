"""A task's root file system: an image named by a path, unpacked once and cached by digest.

What a task may name (``Task.image``):
- an OCI image layout (a directory with an ``oci-layout`` file; ``DIR:TAG`` picks a tag);
- an image tarball as ``docker save`` (docker-archive) or ``skopeo copy ... oci-archive:`` write it;
- a plain root file system directory (used in place: its files keep their owners, so the sandbox
  writes only where they let it).

Images are read with ``skopeo`` (inspect, copy into an OCI layout) and unpacked with ``umoci unpack
--rootless`` (layers applied in order, whiteouts honoured, digests verified): no layer logic of our
own. The unpacked root lands in ``$HARNESSRL_CACHE/images/<digest>-u<owner>/rootfs``, its files
owned by ``owner`` (the sandbox's host uid: the sandbox user owns the image as root owns a
container's), with ``image.json`` (digest, Env, WorkingDir). A second use of the same image, by
any task, reuses it; rollouts that start together on a new image unpack it once (a lock beside
it). Every failure is an ``ImageError`` naming the image and the fix.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from harnessrl.sandbox.base import SandboxError

INSTALL_HINT = "install them with `apt-get install -y skopeo umoci` (Debian/Ubuntu)"
TOOL_TIMEOUT_S = 1800.0


class ImageError(SandboxError):
    """A task's image cannot be read or unpacked; the message names the image and says why."""


@dataclass(frozen=True)
class ImageRoot:
    """An unpacked image: its root directory and what its config says a process starts with."""

    source: str
    rootfs: Path
    digest: str = ""
    env: dict[str, str] = field(default_factory=dict)
    workdir: str = ""


def cache_root(cache: Path | None = None) -> Path:
    base = cache or Path(os.environ.get("HARNESSRL_CACHE") or Path.home() / ".cache" / "harnessrl")
    return base / "images"


def _require(tool: str) -> str:
    found = shutil.which(tool)
    if found is None:
        raise ImageError(f"reading image tasks needs `skopeo` and `umoci` on PATH ({tool} is missing): {INSTALL_HINT}")
    return found


def _split_tag(source: str) -> tuple[Path, str]:
    """(path, tag) of ``PATH`` or ``PATH:TAG`` (a tag only after an existing directory)."""
    head, sep, tag = source.rpartition(":")
    if sep and head and "/" not in tag and Path(head).is_dir() and not Path(source).exists():
        return Path(head), tag
    return Path(source), ""


def image_kind(source: str) -> str:
    """"oci-layout", "docker-archive", "oci-archive" or "rootfs"; ImageError when it is none."""
    path, _ = _split_tag(source)
    if path.is_dir():
        return "oci-layout" if (path / "oci-layout").is_file() else "rootfs"
    if not path.is_file():
        raise ImageError(f"image {source}: no such file or directory")
    try:
        with tarfile.open(path) as tar:
            names = {n.lstrip("./") for n in tar.getnames()[:10000]}
    except (tarfile.TarError, OSError, EOFError) as e:
        raise ImageError(f"image {source}: not a readable image tarball ({type(e).__name__}: {e}); expected "
                         "`docker save` or `skopeo copy ... oci-archive:` output, an OCI layout or a root "
                         "directory") from None
    if "manifest.json" in names:
        return "docker-archive"
    if "oci-layout" in names and "index.json" in names:
        return "oci-archive"
    raise ImageError(f"image {source}: a tarball without manifest.json (docker save) or oci-layout + index.json "
                     "(OCI archive): not an image")


def skopeo_ref(source: str) -> str:
    kind = image_kind(source)
    if kind == "rootfs":
        raise ImageError(f"image {source} is a plain directory (no oci-layout file): it has no manifest")
    path, tag = _split_tag(source)
    return f"{kind if kind != 'oci-layout' else 'oci'}:{path.resolve()}" + (f":{tag}" if tag else "")


def _tool(argv: list[str], source: str, what: str) -> str:
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise ImageError(f"image {source}: {what} did not finish within {TOOL_TIMEOUT_S:.0f}s") from None
    if res.returncode != 0:
        msg = (res.stderr or res.stdout).strip().splitlines()
        raise ImageError(f"image {source}: {what} failed: {(msg[-1] if msg else '')[:500]} (corrupt or "
                         "incomplete image?)")
    return res.stdout


def inspect_image(source: str) -> tuple[str, dict[str, Any]]:
    """(manifest digest, the image config's ``config`` object: Env, WorkingDir, User ...) read
    with skopeo, without unpacking. A plain rootfs directory: ("", {})."""
    if image_kind(source) == "rootfs":
        return "", {}
    skopeo = _require("skopeo")
    ref = skopeo_ref(source)
    digest = json.loads(_tool([skopeo, "inspect", ref], source, "skopeo inspect"))["Digest"]
    config = json.loads(_tool([skopeo, "inspect", "--config", ref], source, "skopeo inspect --config"))
    return str(digest), dict(config.get("config") or {})


def image_env(config: dict[str, Any]) -> dict[str, str]:
    out = {}
    for item in config.get("Env") or []:
        name, sep, value = str(item).partition("=")
        if sep and name:
            out[name] = value
    return out


def prepare_image(source: str, owner: int | None = None, cache: Path | None = None,
                  log: Callable[[str], None] | None = None) -> ImageRoot:
    """The unpacked root of ``source``, unpacking it first if this digest is not cached yet.
    ``owner``: the host uid its files get (default: this process's). ``log(text)`` hears progress."""
    from harnessrl.sandbox.rootfs import check_root

    say = log or (lambda text: print(text, file=sys.stderr, flush=True))
    owner = os.getuid() if owner is None else owner
    if image_kind(source) == "rootfs":
        path = _split_tag(source)[0].resolve()
        check_root(str(path), source)
        return ImageRoot(source, path)
    digest, config = inspect_image(source)
    final = cache_root(cache) / f"{digest.replace(':', '-')}-u{owner}"
    if not (final / "image.json").is_file():
        with _unpack_lock(final):  # rollouts starting together on a new image unpack it once
            if not (final / "image.json").is_file():
                say(f"unpacking image {source} ({digest[:19]}) into {final}")
                _unpack(source, digest, config, final, owner)
    check_root(str(final / "rootfs"), source)
    meta = json.loads((final / "image.json").read_text())
    return ImageRoot(source, final / "rootfs", digest, dict(meta.get("env") or {}), str(meta.get("workdir") or ""))


@contextlib.contextmanager
def _unpack_lock(final: Path) -> Iterator[None]:
    """An exclusive lock on ``final``'s unpacking (flock on a file beside it; released on exit,
    also when the process dies)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(final.parent / f".{final.name}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _unpack(source: str, digest: str, config: dict[str, Any], final: Path, owner: int) -> None:
    skopeo, umoci = _require("skopeo"), _require("umoci")
    final.parent.mkdir(parents=True, exist_ok=True)
    final.parent.chmod(0o700)  # the unpacked files belong to the sandbox uid: no host user walks in
    tmp = Path(tempfile.mkdtemp(prefix=".unpack-", dir=final.parent))
    try:
        layout = tmp / "layout"
        _tool([skopeo, "copy", "--quiet", skopeo_ref(source), f"oci:{layout}:img"], source, "skopeo copy")
        _tool([umoci, "unpack", "--rootless", "--image", f"{layout}:img", str(tmp / "bundle")], source, "umoci unpack")
        shutil.rmtree(layout)
        bundle = tmp / "bundle"
        if owner != os.getuid():
            _chown_tree(bundle / "rootfs", owner)
        meta = {"source": source, "digest": digest, "env": image_env(config),
                "workdir": str(config.get("WorkingDir") or "")}
        (bundle / "image.json").write_text(json.dumps(meta, indent=1))
        try:
            bundle.rename(final)
        except OSError:  # unpacked concurrently by another rollout: keep theirs
            if not (final / "image.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _chown_tree(root: Path, owner: int) -> None:
    os.lchown(root, owner, owner)
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), owner, owner)


def sandbox_owner(host_uid: int) -> int:
    """The host uid a sandbox's processes run as: ``host_uid`` (SandboxConfig.host_uid) when this
    process is root, else this process's uid."""
    return host_uid if os.geteuid() == 0 else os.getuid()


def seed_workspace(image: ImageRoot, mount: str, dest: Path) -> None:
    """Copy what the image holds at ``mount`` (the task's workspace path) into ``dest``: the
    workspace is a fresh tmpfs over that path, filled from ``dest``."""
    from harnessrl.sandbox.rootfs import resolve_in_root

    found = resolve_in_root(image.rootfs, mount)
    if found is not None and found.is_dir():
        shutil.copytree(found, dest, symlinks=True, dirs_exist_ok=True)


def image_sandbox_fields(image: ImageRoot, fields: dict[str, Any]) -> dict[str, Any]:
    """SandboxConfig fields (a model_dump) for a sandbox on ``image``: its root, and its Env under
    the config's own env, PATH led by the harness runtime (sandbox/rootfs.py)."""
    from harnessrl.sandbox.rootfs import path_env

    env = {**image.env, **(fields.get("env") or {})}
    env["PATH"] = path_env(env.get("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"))
    return {**fields, "rootfs": str(image.rootfs), "env": env}
