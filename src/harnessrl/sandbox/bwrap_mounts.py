"""What a bwrap sandbox sees: the bubblewrap argv for its file system, users and namespaces.

Visible inside (everything else is absent):
- ``/usr`` read-only, and ``/bin``, ``/sbin``, ``/lib``, ``/lib64`` as on the host (links or
  read-only binds); ``/etc`` is a read-only copy of a curated part of the host's (loader, TLS
  certificates, time zone, alternatives, ...) plus generated ``passwd``/``group``/``hosts``/
  ``hostname``; NOT shadow files, ssl/private, the host's resolv.conf, or the rest of /etc.
- private ``/proc`` (pid namespace), minimal ``/dev`` (read-only), tmpfs ``/tmp`` and HOME
  (``scratch_mb`` each), ``/dev/shm`` (``shm_mb``) and the workspace, a tmpfs of ``workspace_mb``
  at ``cfg.workspace_mount``. These are the only writable paths (plus ``/dev/pts``, a pty's
  node; on an image, its writable layer of ``scratch_mb`` at ``/``); every tmpfs page also counts
  against ``memory_mb``.
- with ``cfg.python``: this interpreter read-only at its own path — the venv (``sys.prefix``,
  e.g. /work/main/.venv, only that directory, not the checkout around it) and its base
  installation (``sys.base_prefix``); the venv's ``bin`` comes first on PATH, so ``python`` and
  ``python3`` both resolve to it.
- ``cfg.extra_ro_binds`` read-only.
Namespaces: all of them (user, mount, pid, net, ipc, uts, cgroup). The sandbox user is
``cfg.uid`` inside a user namespace, with no capabilities at all (an empty bounding set, also
for uid 0) and, with ``cfg.seccomp``, the default seccomp profile (sandbox/seccomp.py).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

from harnessrl.sandbox import rootfs
from harnessrl.sandbox.base import SandboxConfig, SandboxError

ETC_KEEP = (
    "alternatives",
    "ssl/certs",
    "ssl/openssl.cnf",
    "ca-certificates",
    "ca-certificates.conf",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "timezone",
    "nsswitch.conf",
    "protocols",
    "services",
    "mime.types",
    "os-release",
    "debian_version",
    "bash.bashrc",
    "profile",
    "inputrc",
    "locale.alias",
    "gai.conf",
    "host.conf",
    "magic",
    "magic.mime",
    "python3",
    "python3.11",
)
TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
# kernel settings and triggers under the sandbox's own /proc, bound read-only over themselves
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs", "acpi", "scsi", "tty", "driver", "kcore")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def python_prefixes() -> list[str]:
    """The directories that hold this interpreter: the venv and its base installation."""
    prefixes = []
    for p in (
        sys.prefix,
        sys.base_prefix,
        os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))),
    ):
        real = os.path.realpath(p)
        if real not in prefixes and not real.startswith("/usr/") and real != "/usr":
            prefixes.append(real)
    return prefixes


def inner_path_env(cfg: SandboxConfig) -> str:
    if cfg.rootfs is not None:  # the image's tools, not this venv's python, answer to `python3`
        return rootfs.path_env(SYSTEM_PATH)
    venv_bin = os.path.join(os.path.realpath(sys.prefix), "bin")
    return f"{venv_bin}:{SYSTEM_PATH}" if cfg.python else SYSTEM_PATH


def identity_files(cfg: SandboxConfig) -> dict[str, str]:
    """passwd/group/hosts/hostname for the sandbox user: name -> text."""
    name = "root" if cfg.uid == 0 else "sandbox"
    passwd = "root:x:0:0:root:/root:/bin/bash\n"
    group = "root:x:0:\n"
    if cfg.uid != 0:
        passwd += f"{name}:x:{cfg.uid}:{cfg.uid}:{name}:{cfg.home}:/bin/bash\n"
        group += f"{name}:x:{cfg.uid}:\n"
    passwd += "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    group += "nogroup:x:65534:\n"
    hosts = f"127.0.0.1 localhost {cfg.hostname}\n::1 localhost ip6-localhost ip6-loopback\n"
    return {"passwd": passwd, "group": group, "hosts": hosts, "hostname": cfg.hostname + "\n"}


def _etc_fingerprint(files: dict[str, str]) -> str:
    h = hashlib.sha256(repr(sorted(files.items())).encode())
    for name in ETC_KEEP:  # a directory's mtime changes when entries are added or replaced
        try:
            st = os.lstat(f"/etc/{name}")
            h.update(f"{name}:{st.st_mtime_ns}:{st.st_size}".encode())
        except OSError:
            pass
    return h.hexdigest()[:16]


def sandbox_cache_dir() -> Path:
    """$HARNESSRL_CACHE/sandbox: the built /etc copies and the compiled seccomp profile."""
    return Path(os.environ.get("HARNESSRL_CACHE", Path.home() / ".cache" / "harnessrl")) / "sandbox"


def sandbox_etc(cfg: SandboxConfig) -> Path:
    """A ready /etc for the sandbox: the curated host entries plus the identity files.

    Built once per content (cached under $HARNESSRL_CACHE/sandbox/) and bound read-only as ONE
    mount: binding ~25 entries one by one cost ~20 ms per sandbox start.
    """
    files = identity_files(cfg)
    cache = sandbox_cache_dir()
    final = cache / f"etc-{_etc_fingerprint(files)}"
    if final.is_dir():
        return final
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="etc-build-", dir=cache))
    for name in ETC_KEEP:
        src, dst = Path("/etc") / name, tmp / name
        if not (src.exists() or src.is_symlink()):
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir() and not src.is_symlink():
            shutil.copytree(src, dst, symlinks=True)
        else:
            shutil.copy2(src, dst, follow_symlinks=False)
    for name, text in files.items():
        (tmp / name).write_text(text)
    for d in [tmp, *(p for p in tmp.rglob("*") if p.is_dir() and not p.is_symlink())]:
        d.chmod(0o755)
    try:
        tmp.rename(final)
    except OSError:  # built concurrently by another sandbox: keep theirs
        shutil.rmtree(tmp, ignore_errors=True)
    return final


def _system_args() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for name in TOP_LEVEL:
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            args += ["--ro-bind", str(host), str(host)]
    return args


def _ro_binds(cfg: SandboxConfig) -> list[tuple[str, str]]:
    pairs = [(p, p) for p in python_prefixes()] if cfg.python else []
    for spec in cfg.extra_ro_binds:
        host, _, inner = spec.partition(":")
        if not os.path.exists(host):
            raise SandboxError(f"extra_ro_binds: {host} does not exist on the host")
        pairs.append((host, inner or host))
    return sorted(pairs, key=lambda hp: hp[1].count("/"))


def host_binds(cfg: SandboxConfig) -> list[tuple[str, str]]:
    """(host path, inner path) of every read-only bind that is not a system directory: the
    curated /etc, the interpreter's prefixes and ``cfg.extra_ro_binds``. As root, bwrap runs as
    an unprivileged host uid that may not be able to traverse /root to reach a venv or a harness
    cache, so the sandbox object stages these first (``staged``, see bwrap_start.stage_argv).
    On a ``cfg.rootfs``: the identity files over the image's /etc and the runtime (rootfs.py)."""
    if cfg.rootfs is not None:
        etc = rootfs.identity_dir(cfg, sandbox_cache_dir(), identity_files(cfg))
        own = [(str(etc / name), f"/etc/{name}") for name in rootfs.ETC_IDENTITY]
        return [*own, *rootfs.runtime_binds(cfg), *_ro_binds(cfg)]
    return [(str(sandbox_etc(cfg)), "/etc"), *_ro_binds(cfg)]


def bwrap_argv(
    cfg: SandboxConfig,
    *,
    info_fd: int,
    block_fd: int,
    init: list[str],
    seccomp_fd: int | None = None,
    staged: dict[str, str] | None = None,
    as_pid_1: bool = False,
) -> list[str]:
    """The full bwrap command line of a sandbox whose keeper process is ``init``.

    bwrap reports its pids on ``info_fd`` and, with the sandbox set up, waits for a byte on
    ``block_fd`` before it starts ``init``. ``init`` runs with no capabilities (``--cap-drop
    ALL``: an empty bounding set even when ``cfg.uid`` is 0), with an empty environment but PATH
    (``--clearenv``: nothing of the host's environment is readable in ``/proc/1/environ``) and
    under the BPF program read from ``seccomp_fd`` when one is given. ``staged`` (host path ->
    where it is bound for bwrap, see host_binds) replaces source paths. ``/proc/sys`` (and the
    other kernel knobs under /proc) are read-only. ``as_pid_1``: ``init`` is the pid namespace's
    init itself (it must reap orphans), not a child of bwrap's.
    """
    stage = staged or {}

    def ro(host: str, inner: str) -> list[str]:
        return ["--ro-bind", stage.get(host, host), inner]

    scratch, ws = str(cfg.scratch_mb << 20), str(cfg.workspace_mb << 20)
    args = ["bwrap", "--unshare-all", "--unshare-user", "--uid", str(cfg.uid), "--gid", str(cfg.uid)]
    args += ["--hostname", cfg.hostname, "--new-session", "--cap-drop", "ALL"]
    args += ["--clearenv", "--setenv", "PATH", SYSTEM_PATH]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    args += ["--info-fd", str(info_fd), "--block-fd", str(block_fd)]
    if cfg.rootfs is not None:  # the image under its writable layer (staged by bwrap_start.stage_argv)
        etc = rootfs.identity_dir(cfg, sandbox_cache_dir(), identity_files(cfg))
        args += rootfs.root_args(cfg, stage.get(cfg.rootfs, cfg.rootfs), etc, ro)
    else:
        args += _system_args() + ro(str(sandbox_etc(cfg)), "/etc")
    # /dev: bwrap's own tmpfs (sized at half the host's RAM) is read-only once built, with a
    # tmpfs of shm_mb at /dev/shm (POSIX shared memory, semaphores)
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(cfg.shm_mb << 20), "--tmpfs", "/dev/shm"]
    for knob in PROC_READ_ONLY:
        if os.path.exists(f"/proc/{knob}"):
            args += ["--ro-bind", f"/proc/{knob}", f"/proc/{knob}"]
    args += ["--size", scratch, "--tmpfs", "/tmp", "--size", scratch, "--tmpfs", cfg.home]
    args += ["--size", ws, "--tmpfs", cfg.workspace_mount]
    for host, inner in _ro_binds(cfg):
        args += ro(host, inner)
    args += [] if cfg.rootfs is not None else ["--remount-ro", "/"]  # a rootfs's layer stays writable
    args += ["--remount-ro", "/dev"]  # that mount only: /dev/shm and /dev/pts are mounts of their own
    args += ["--remount-ro", "/proc"] if cfg.read_only_proc else []
    args += ["--chdir", cfg.workspace_mount]
    return args + (["--as-pid-1"] if as_pid_1 else []) + ["--", *init]
