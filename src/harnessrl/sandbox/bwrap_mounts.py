"""What a bwrap sandbox sees: the bubblewrap argv for its file system, users and namespaces.

Visible inside (everything else is absent):
- ``/usr`` read-only, and ``/bin``, ``/sbin``, ``/lib``, ``/lib64`` as on the host (links or
  read-only binds); a curated read-only part of ``/etc`` (loader, TLS certificates, time zone,
  alternatives, ...) plus generated ``passwd``/``group``/``hosts``/``hostname``; NOT shadow files,
  the host's resolv.conf, or the rest of /etc.
- private ``/proc`` (pid namespace), minimal ``/dev``, tmpfs ``/tmp`` and HOME (``scratch_mb``
  each) and the workspace, a tmpfs of ``workspace_mb`` at ``cfg.workspace_mount``.
- with ``cfg.python``: this interpreter read-only at its own path — the venv (``sys.prefix``,
  e.g. /work/main/.venv, only that directory, not the checkout around it) and its base
  installation (``sys.base_prefix``); the venv's ``bin`` comes first on PATH, so ``python`` and
  ``python3`` both resolve to it.
- ``cfg.extra_ro_binds`` read-only.
Namespaces: all of them (user, mount, pid, net, ipc, uts, cgroup). The sandbox user is
``cfg.uid`` inside a user namespace, with no capabilities on the host.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from harnessrl.sandbox.base import SandboxConfig

ETC_KEEP = (
    "alternatives", "ssl", "ca-certificates", "ca-certificates.conf", "ld.so.cache", "ld.so.conf",
    "ld.so.conf.d", "localtime", "timezone", "nsswitch.conf", "protocols", "services", "mime.types",
    "os-release", "debian_version", "bash.bashrc", "profile", "inputrc", "locale.alias", "gai.conf",
    "host.conf", "magic", "magic.mime", "python3", "python3.11",
)
TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def python_prefixes() -> list[str]:
    """The directories that hold this interpreter: the venv and its base installation."""
    prefixes = []
    for p in (sys.prefix, sys.base_prefix, os.path.dirname(os.path.dirname(os.path.realpath(sys.executable)))):
        real = os.path.realpath(p)
        if real not in prefixes and not real.startswith("/usr/") and real != "/usr":
            prefixes.append(real)
    return prefixes


def inner_path_env(cfg: SandboxConfig) -> str:
    venv_bin = os.path.join(os.path.realpath(sys.prefix), "bin")
    return f"{venv_bin}:{SYSTEM_PATH}" if cfg.python else SYSTEM_PATH


def identity_files(root: Path, cfg: SandboxConfig) -> dict[str, Path]:
    """Write passwd/group/hosts/hostname for the sandbox user into ``root``; inner path -> file."""
    name = "root" if cfg.uid == 0 else "sandbox"
    passwd = "root:x:0:0:root:/root:/bin/bash\n"
    group = "root:x:0:\n"
    if cfg.uid != 0:
        passwd += f"{name}:x:{cfg.uid}:{cfg.uid}:{name}:{cfg.home}:/bin/bash\n"
        group += f"{name}:x:{cfg.uid}:\n"
    passwd += "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
    group += "nogroup:x:65534:\n"
    hosts = f"127.0.0.1 localhost {cfg.hostname}\n::1 localhost ip6-localhost ip6-loopback\n"
    files = {"/etc/passwd": passwd, "/etc/group": group, "/etc/hosts": hosts, "/etc/hostname": cfg.hostname + "\n"}
    out: dict[str, Path] = {}
    for inner, text in files.items():
        host = root / inner.rsplit("/", 1)[1]
        host.write_text(text)
        out[inner] = host
    return out


def _system_args() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for name in TOP_LEVEL:
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            args += ["--ro-bind", str(host), str(host)]
    for name in ETC_KEEP:
        host = Path("/etc") / name
        if host.exists():
            args += ["--ro-bind", str(host), str(host)]
    return args


def _ro_binds(cfg: SandboxConfig) -> list[tuple[str, str]]:
    pairs = [(p, p) for p in python_prefixes()] if cfg.python else []
    for spec in cfg.extra_ro_binds:
        host, _, inner = spec.partition(":")
        if not os.path.exists(host):
            raise FileNotFoundError(f"extra_ro_binds: {host} does not exist")
        pairs.append((host, inner or host))
    return sorted(pairs, key=lambda hp: hp[1].count("/"))


def bwrap_argv(cfg: SandboxConfig, *, root: Path, info_fd: int, init: list[str]) -> list[str]:
    """The full bwrap command line for a sandbox whose host-side scratch dir is ``root``."""
    scratch, ws = str(cfg.scratch_mb << 20), str(cfg.workspace_mb << 20)
    args = ["bwrap", "--unshare-all", "--unshare-user", "--uid", str(cfg.uid), "--gid", str(cfg.uid)]
    args += ["--hostname", cfg.hostname, "--new-session", "--info-fd", str(info_fd)]
    args += _system_args()
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--size", scratch, "--tmpfs", "/tmp", "--size", scratch, "--tmpfs", cfg.home]
    args += ["--size", ws, "--tmpfs", cfg.workspace_mount]
    for inner, host in identity_files(root, cfg).items():
        args += ["--ro-bind", str(host), inner]
    for host, inner in _ro_binds(cfg):
        args += ["--ro-bind", host, inner]
    args += ["--remount-ro", "/", "--chdir", cfg.workspace_mount, "--", *init]
    return args
