"""A bwrap sandbox on a task's own root file system (an unpacked image, ``SandboxConfig.rootfs``).

What differs from a sandbox on the host's system directories (bwrap_mounts.py):
- ``/`` is an overlay: the image read-only below, a fresh tmpfs of ``scratch_mb`` above (mounted in
  the private mount namespace that stages bwrap, so it dies with the sandbox). A rollout may write
  anywhere, and nothing it writes reaches the image or the next rollout. Files of an unpacked image
  belong to the sandbox's host uid (tasks/images.py), so the sandbox user owns the image as root
  owns a container's.
- ``/etc`` is the image's, with ``passwd``/``group`` (the image's plus the sandbox user) and
  ``hosts``/``hostname`` bound read-only over it.
- the harness runtime comes from the host: ``node`` at ``RUNTIME_BIN`` (first on PATH), the
  interpreter prefixes as before, and every host library they load that the image lacks, bound
  read-only at its own path (a root without a C library gets the host's). Where the image has a
  library, its own copy is used by those programs (Claude Code's executable needs glibc 2.17,
  node 2.28, Codex's is static).
- this interpreter (the harness launcher, ``python -IS``) runs on the host's own loader and
  libraries whatever the image holds: they are bound at ``RUNTIME_LIB`` and a command whose argv[0]
  is this interpreter starts as ``RUNTIME_LIB/ld-*.so --library-path RUNTIME_LIB python ...``, so an
  image with an older C library (Debian 11, Ubuntu 20.04: glibc 2.31) runs it too. The programs it
  starts load as usual, from the image.
- commands change directory with the image's ``sh`` (``cd``), not ``env -C``, which busybox lacks.
The image needs ``/bin/sh`` (and ``tar`` for ``copy_in``); ``check_root`` says so by name. A copy
out runs nothing of the image (sandbox/snapshot.py): the agent may have replaced any program of it
in its writable layer, so no image program runs for the runner once the harness has ended.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from harnessrl.sandbox.base import SandboxConfig, SandboxError

RUNTIME_BIN = "/.harnessrl/rt/bin"
RUNTIME_LIB = "/.harnessrl/rt/lib"  # this interpreter's loader and libraries, from the host
ETC_IDENTITY = ("passwd", "group", "hosts", "hostname")
# Changes to the directory in $1 and runs the rest, with PWD naming it (see bwrap.with_pwd).
ENTER_DIR = 'cd -- "$1" || exit 125; PWD=$1; export PWD; shift; exec "$@"'
MAX_LINKS = 40
# extension modules of the in-sandbox harness launcher (harness/launcher.py) with libraries of their own
LAUNCHER_EXTENSIONS = ("_ctypes",)


class ImageRootError(SandboxError):
    """The task's root file system cannot host a sandbox (no shell, not a directory); the message
    names the image and what it lacks."""


def resolve_in_root(root: Path, path: str) -> Path | None:
    """The host path of ``path`` as seen inside ``root`` (symlinks resolved within it, absolute ones
    against ``root``, never the host's /), or None when it does not exist."""
    parts = [p for p in path.split("/") if p not in ("", ".")]
    cur: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if cur:
                cur.pop()
            continue
        host = root.joinpath(*cur, part)
        if host.is_symlink():
            hops += 1
            if hops > MAX_LINKS:
                return None
            target = os.readlink(host)
            parts = [p for p in target.split("/") if p not in ("", ".")] + parts
            if target.startswith("/"):
                cur = []
            continue
        if not host.exists():
            return None
        cur.append(part)
    return root.joinpath(*cur)


def check_root(root: str, name: str = "") -> None:
    """ImageRootError unless ``root`` is a directory with a usable /bin/sh."""
    label = name or root
    base = Path(root)
    if not base.is_dir():
        raise ImageRootError(f"image {label}: its root file system {root} is not a directory")
    sh = resolve_in_root(base, "/bin/sh")
    if sh is None or not sh.is_file():
        raise ImageRootError(f"image {label} has no shell (/bin/sh): a sandbox needs /bin/sh (and tar) in "
                             "the image; add them to the image (e.g. busybox or dash)")


def has_program(root: str, path: str) -> bool:
    found = resolve_in_root(Path(root), path)
    return found is not None and found.is_file()


def host_node() -> str | None:
    """The host's node binary (resolved), if any."""
    found = shutil.which("node", path="/usr/local/bin:/usr/bin:/bin")
    return os.path.realpath(found) if found else None


def host_library_names(executables: list[str]) -> dict[str, str]:
    """{name the loader looks for (libc.so.6; the loader's own file name): its path on this host
    (as ldd names it, e.g. /lib/x86_64-linux-gnu/libc.so.6)} for the shared libraries and the
    loader that ``executables`` need (``ldd``)."""
    out: dict[str, str] = {}
    for exe in executables:
        try:
            text = subprocess.run(["ldd", exe], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        for line in text.splitlines():
            words = line.split()
            if len(words) >= 3 and words[1] == "=>":
                name, path = words[0], words[2]
            else:
                path = words[0] if words else ""
                name = os.path.basename(path)
            if path.startswith("/"):
                out.setdefault(name, path)
    return out


def host_libraries(executables: list[str]) -> list[str]:
    """Paths (as the loader names them, e.g. /lib/x86_64-linux-gnu/libc.so.6) of the shared
    libraries and the loader that ``executables`` need on this host (``ldd``)."""
    return list(dict.fromkeys(host_library_names(executables).values()))


def elf_interpreter(path: str) -> str | None:
    """The program interpreter (PT_INTERP: the loader) a 64-bit little-endian ELF file names, or
    None (not such a file, static, unreadable)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
                return None
            phoff = int.from_bytes(head[0x20:0x28], "little")
            phentsize = int.from_bytes(head[0x36:0x38], "little")
            phnum = int.from_bytes(head[0x38:0x3A], "little")
            for i in range(min(phnum, 256)):
                f.seek(phoff + i * phentsize)
                ph = f.read(56)
                if len(ph) == 56 and int.from_bytes(ph[0:4], "little") == 3:  # PT_INTERP
                    f.seek(int.from_bytes(ph[8:16], "little"))
                    raw = f.read(min(int.from_bytes(ph[32:40], "little"), 4096))
                    return raw.split(b"\0", 1)[0].decode(errors="replace") or None
    except OSError:
        return None
    return None


def interpreter_programs() -> list[str]:
    """This interpreter and its extension modules with libraries of their own (the launcher's)."""
    return [os.path.realpath(sys.executable), *_extension_paths(LAUNCHER_EXTENSIONS)]


def host_loaded_argv(argv: list[str]) -> list[str]:
    """``argv`` started on the host's loader with ``RUNTIME_LIB`` as its library path when
    argv[0] is this interpreter (a rootfs sandbox binds them there: runtime_binds), else as is."""
    if not argv or not argv[0].startswith("/") or os.path.realpath(argv[0]) != os.path.realpath(sys.executable):
        return argv
    loader = elf_interpreter(os.path.realpath(sys.executable))
    if loader is None:
        return argv
    return [f"{RUNTIME_LIB}/{os.path.basename(loader)}", "--library-path", RUNTIME_LIB, *argv]


def _extension_paths(names: tuple[str, ...]) -> list[str]:
    """Files of this interpreter's extension modules ``names`` (those that are shared objects)."""
    import importlib.util

    out = []
    for name in names:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin and spec.origin.endswith(".so"):
            out.append(spec.origin)
    return out


def bound_executables(cfg: SandboxConfig) -> list[str]:
    """Native executables of the read-only binds (a harness cache): the ELF files that
    ``node_modules/.bin/*`` and ``bin/*`` name there (Claude Code ships one, linked to the host's
    C library)."""
    out: list[str] = []
    for spec in cfg.extra_ro_binds:
        host = Path(spec.partition(":")[0])
        for sub in ("node_modules/.bin", "bin"):
            folder = host / sub
            if not folder.is_dir():
                continue
            for entry in sorted(folder.iterdir()):
                real = os.path.realpath(entry)
                try:
                    with open(real, "rb") as f:
                        elf = f.read(4) == b"\x7fELF"
                except OSError:
                    continue
                if elf and real not in out:
                    out.append(real)
    return out


def runtime_binds(cfg: SandboxConfig) -> list[tuple[str, str]]:
    """(host, inner) read-only binds that let the harness runtime run on ``cfg.rootfs``: node at
    RUNTIME_BIN and each host library that it, this interpreter or a bound native executable
    (bound_executables) loads and the image lacks; and this interpreter's loader and libraries at
    RUNTIME_LIB under the names the loader looks for (host_loaded_argv)."""
    assert cfg.rootfs is not None
    root = Path(cfg.rootfs)
    node = host_node()
    own = interpreter_programs()
    exes = own + ([node] if node else []) + bound_executables(cfg)
    binds = [(node, f"{RUNTIME_BIN}/node")] if node else []
    for lib in host_libraries(exes):
        if resolve_in_root(root, lib) is None and os.path.exists(lib):
            binds.append((os.path.realpath(lib), lib))
    for name, lib in host_library_names(own).items():
        if "/" not in name and os.path.exists(lib):
            binds.append((os.path.realpath(lib), f"{RUNTIME_LIB}/{name}"))
    return binds


def _merged(image_text: str, wanted: list[str]) -> str:
    """``image_text`` (a passwd or group file) plus the ``wanted`` lines whose name and id it lacks."""
    lines = [ln for ln in image_text.splitlines() if ln.strip()]
    names = {ln.split(":", 1)[0] for ln in lines}
    ids = {ln.split(":")[2] for ln in lines if ln.count(":") >= 2}
    for w in wanted:
        name, _, rest = w.partition(":")
        uid = rest.split(":")[1] if rest.count(":") >= 1 else ""
        if name not in names and uid not in ids:
            lines.append(w)
    return "\n".join(lines) + "\n"


def identity_dir(cfg: SandboxConfig, cache: Path, ours: dict[str, str]) -> Path:
    """A directory with passwd, group, hosts and hostname for the sandbox on ``cfg.rootfs``: the
    image's users and groups plus those of ``ours`` (bwrap_mounts.identity_files), bound over the
    image's, read-only."""
    assert cfg.rootfs is not None
    root = Path(cfg.rootfs)
    files = dict(ours)
    for name in ("passwd", "group"):
        found = resolve_in_root(root, f"/etc/{name}")
        text = found.read_text(errors="replace") if found is not None and found.is_file() else ""
        files[name] = _merged(text, ours[name].splitlines())
    digest = hashlib.sha256(repr(sorted(files.items())).encode()).hexdigest()[:16]
    final = cache / f"rootfs-etc-{digest}"
    if final.is_dir():
        return final
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="rootfs-etc-build-", dir=cache))
    for name, text in files.items():
        (tmp / name).write_text(text)
        (tmp / name).chmod(0o644)
    tmp.chmod(0o755)
    try:
        tmp.rename(final)
    except OSError:  # built concurrently: keep theirs
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def root_args(cfg: SandboxConfig, merged: str, etc_dir: Path, ro: Callable[[str, str], list[str]]) -> list[str]:
    """bwrap arguments for the root: the overlay at ``merged`` as /, the identity files over the
    image's /etc and the runtime binds. ``ro(host, inner)`` makes one read-only bind (staged)."""
    args = ["--bind", merged, "/"]
    for name in ETC_IDENTITY:
        args += ro(str(etc_dir / name), f"/etc/{name}")
    for host, inner in runtime_binds(cfg):
        args += ro(host, inner)
    return args


def overlay_step(cfg: SandboxConfig, point: str, owner: int) -> list[str]:
    """entry_helper's --overlay step: the image below, a tmpfs of scratch_mb above, at ``point``."""
    assert cfg.rootfs is not None
    lower = os.path.realpath(cfg.rootfs)
    for path in (lower, point):
        if any(c in path for c in ",:\\\n"):
            raise ImageRootError(f"image root {path}: paths with ',', ':' or '\\' cannot be overlay layers")
    return ["--overlay", f"{lower}:{point}:{cfg.scratch_mb << 20}:{owner}"]


def enter_dir_argv(cfg: SandboxConfig, workdir: str, argv: list[str]) -> list[str]:
    """The argv that runs ``argv`` in ``workdir`` inside: ``env -C`` on the host's system, the
    image's ``sh`` on a rootfs (this interpreter on the host's loader: host_loaded_argv)."""
    if cfg.rootfs is None:
        return ["env", "-C", workdir, "--", *argv]
    return ["sh", "-c", ENTER_DIR, "sh", workdir, *host_loaded_argv(argv)]


def path_env(image_path: str) -> str:
    """PATH inside a sandbox on a rootfs: the harness runtime first, then the image's PATH."""
    return f"{RUNTIME_BIN}:{image_path}" if image_path else RUNTIME_BIN
