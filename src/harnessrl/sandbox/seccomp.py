"""The bwrap sandbox's default seccomp profile: a deny list of the syscalls a rollout never needs.

Like the profiles bubblewrap users (Flatpak, Docker's default) apply: everything is allowed
except kernel interfaces that are either privileged (useless after the capability drop, so
blocking them only shrinks the kernel's attack surface) or ways out of the sandbox:

- namespaces: ``unshare``, ``clone``/``clone`` with any ``CLONE_NEW*`` flag (new user namespaces
  would hand the process a fresh set of capabilities), ``clone3`` (its flags live in memory where
  a filter cannot read them: it answers ENOSYS, so libc falls back to ``clone``);
- mounts: ``mount``, ``umount2``, ``pivot_root`` and the new mount API (``fsopen`` ...);
- reaching into other processes: ``ptrace``, ``process_vm_readv/writev``, ``pidfd_getfd``,
  ``process_madvise``, ``kcmp`` (code a verifier runs must not reach the verifier, whatever Yama
  says: docs/security.md, "The verifier and the code it runs");
- kernel keyrings, ``bpf``, ``perf_event_open``, ``userfaultfd``, ``io_uring_*`` (ENOSYS: libuv
  falls back to its thread pool), ``kexec_*``, ``reboot``, modules, ``swapon/off``, ``acct``,
  ``syslog``, quotas, file handles (``open_by_handle_at``), clock setting, ``iopl/ioperm``,
  ``uselib``/``ustat``/``sysfs``/``vhangup`` and the ``TIOCSTI``/``TIOCLINUX`` ioctls (typing
  into a terminal).
Blocked calls fail with EPERM (ENOSYS where noted); nothing is killed, so a harness that probes
a syscall degrades the way it would in a container. ``setns`` and ``chroot`` stay allowed: the
filter is loaded (by entry_helper.py) on the host side of ``nsenter``, which needs both to
enter the sandbox; without capabilities neither does anything inside.

The filter is compiled with libseccomp (through the ``pyseccomp`` binding) for the native
architecture plus its 32-bit compat ABI (x86 on x86_64, arm on aarch64): a 32-bit syscall cannot
side-step the rules. Where libseccomp is missing, ``write_filter`` raises SeccompUnavailable
and the sandbox runs without a filter (a warning says so).
"""

from __future__ import annotations

import errno
import hashlib
import os
import platform
import tempfile
from pathlib import Path
from typing import Any

from harnessrl.sandbox.base import SandboxUnavailable

EPERM_CALLS = (
    "unshare", "mount", "umount", "umount2", "pivot_root", "move_mount", "open_tree", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr", "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd",
    "process_madvise", "kcmp", "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "kexec_load", "kexec_file_load", "reboot", "init_module", "finit_module", "delete_module", "swapon",
    "swapoff", "acct", "syslog", "quotactl", "quotactl_fd", "open_by_handle_at", "name_to_handle_at",
    "lookup_dcookie", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "stime", "iopl", "ioperm",
    "uselib", "ustat", "sysfs", "_sysctl", "vhangup", "nfsservctl", "fanotify_init",
)
ENOSYS_CALLS = ("clone3", "io_uring_setup", "io_uring_enter", "io_uring_register")
# clone flags that make a namespace (CLONE_NEWTIME 0x80 overlaps clone()'s exit-signal byte)
CLONE_NEW = {"NEWNS": 0x00020000, "NEWCGROUP": 0x02000000, "NEWUTS": 0x04000000, "NEWIPC": 0x08000000,
             "NEWUSER": 0x10000000, "NEWPID": 0x20000000, "NEWNET": 0x40000000}
TIOCSTI, TIOCLINUX = 0x5412, 0x541C

class SeccompUnavailable(SandboxUnavailable):
    """libseccomp (or its binding) is not installed here: no filter (the sandbox still runs)."""


def _compat_arch(sc: Any, native: int) -> int | None:  # sc: the seccomp module (libseccomp's binding)
    return {sc.Arch.X86_64: sc.Arch.X86, sc.Arch.AARCH64: sc.Arch.ARM}.get(native)


def write_filter(path: Path) -> Path:
    """Compile the default profile into ``path`` as a BPF program (``struct sock_filter`` array),
    what the loader and ``bwrap --seccomp`` take."""
    try:
        import pyseccomp as sc
    except (ImportError, RuntimeError, OSError) as e:  # RuntimeError: the binding found no libseccomp
        raise SeccompUnavailable(f"no seccomp filter: {e} (pip install pyseccomp; apt-get install libseccomp2)")
    f = sc.SyscallFilter(sc.ALLOW)
    compat = _compat_arch(sc, sc.system_arch())
    if compat is not None:
        try:
            f.add_arch(compat)
        except OSError:
            pass
    for names, action in ((EPERM_CALLS, sc.ERRNO(errno.EPERM)), (ENOSYS_CALLS, sc.ERRNO(errno.ENOSYS))):
        for name in names:
            try:
                f.add_rule(action, name)
            except (OSError, ValueError):  # not a syscall on this architecture / libseccomp version
                pass
    for flag in CLONE_NEW.values():
        f.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    for request in (TIOCSTI, TIOCLINUX):
        f.add_rule(sc.ERRNO(errno.EPERM), "ioctl", sc.Arg(1, sc.MASKED_EQ, 0xFFFFFFFF, request))
    with open(path, "wb") as out:
        f.export_bpf(out)
    return path


def cached_filter(cache_dir: Path) -> Path:
    """The compiled profile, built once per (this module's rules, architecture) under cache_dir."""
    digest = hashlib.sha256(Path(__file__).read_bytes() + platform.machine().encode()).hexdigest()[:16]
    final = cache_dir / f"seccomp-{digest}.bpf"
    if final.is_file():
        return final
    cache_dir.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="seccomp-build-", dir=cache_dir)
    os.close(fd)
    try:
        write_filter(Path(tmp))
        os.replace(tmp, final)  # atomic: concurrent builders write the same bytes
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return final
