"""Host-side entry into a bwrap sandbox (run as ``python -I -S entry_helper.py``).

    entry_helper.py STEP... [--seccomp BPF_FILE] [--fork] -- argv...

Standard library only (it runs in an isolated interpreter before the sandbox's root is entered),
single-threaded. The steps run in the order given, then no_new_privs is set, the seccomp filter
(``--seccomp FILE``, read at start: the file is on the host) is loaded and argv is ``exec``-ed:

- ``--private-mounts``: a new mount namespace whose mounts propagate nowhere (host root only).
- ``--bind SRC DST``: bind SRC onto the existing DST (recursively), in that namespace.
- ``--overlay LOWER:POINT:BYTES:UID``: in that namespace, a tmpfs of BYTES at POINT.layer holding
  the upper dir (owned by UID, mode of LOWER) and an overlay of it over LOWER at POINT (an image's
  writable layer, sandbox/rootfs.py).
- ``--become UID:GID``: no supplementary groups, then gid and uid (all three of each) become
  these. Used first when the host user is root: the sandbox's namespaces belong to that
  unprivileged uid (bwrap ran as it), whose processes own no host inode.
- ``--userns FD``: join this user namespace; the caller gets every capability in it (it owns
  it, or an ancestor it is root of).
- ``--setns FD``: join this namespace (mount, uts, ipc, net, pid, cgroup).
- ``--root FD``: ``fchdir`` + ``chroot`` to the sandbox's root directory.
- ``--drop-caps``: empty the capability bounding set and every capability set. This must come
  right after the last ``--userns``, before any ``exec``: joining a user namespace resets the
  bounding set to full, and the exec would clear the capabilities that dropping it needs (why
  ``nsenter`` + ``setpriv`` left commands with a full bounding set).
- ``--fork``: the command runs in a child (the only way into a pid namespace); this process
  waits for it and exits with its status (a child killed by a signal: 128 + the signal).
"""

from __future__ import annotations

import ctypes
import os
import sys

CLONE_NEWUSER, CLONE_NEWNS = 0x10000000, 0x00020000
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, PR_CAP_AMBIENT = 24, 38, 22, 47
PR_CAP_AMBIENT_CLEAR_ALL, SECCOMP_MODE_FILTER = 4, 2
LINUX_CAPABILITY_VERSION_3 = 0x20080522
EINVAL = 22


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]


def _fail(what: str) -> None:
    sys.exit(f"harnessrl sandbox entry: {what} failed: {os.strerror(ctypes.get_errno())}")


def _prctl(libc: ctypes.CDLL, option: int, *args: object) -> int:
    return libc.prctl(option, *[ctypes.c_ulong(a) if isinstance(a, int) else a for a in args])


def drop_all_capabilities(libc: ctypes.CDLL) -> None:
    cap = 0
    while True:  # every capability the kernel knows (EINVAL past the last one)
        if _prctl(libc, PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            if ctypes.get_errno() == EINVAL:
                break
            _fail(f"dropping capability {cap} from the bounding set")
        cap += 1
    if _prctl(libc, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0:
        _fail("clearing ambient capabilities")
    header, data = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    if libc.capset(ctypes.byref(header), data) != 0:  # all zero
        _fail("capset")


def set_fs_user(uid: int, gid: int) -> None:
    """This THREAD's file-system uid/gid become these; its effective capabilities (cleared by
    the switch) are raised again from the permitted set. For host root's copies into a sandbox."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.setfsgid(gid)
    libc.setfsuid(uid)
    if libc.setfsuid(-1) != uid or libc.setfsgid(-1) != gid:  # each returns the previous value
        raise OSError(f"setfsuid({uid})/setfsgid({gid}) did not take")
    header, data = _CapHeader(LINUX_CAPABILITY_VERSION_3, 0), (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget failed")
    for d in data:
        d.effective = d.permitted
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def load_seccomp(libc: ctypes.CDLL, prog: bytes) -> None:
    fprog = _SockFprog(len(prog) // 8, prog)
    if _prctl(libc, PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        _fail("loading the seccomp filter")


def _wait_and_exit(pid: int) -> None:
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
    if os.WIFSIGNALED(status):
        os._exit(128 + os.WTERMSIG(status))
    os._exit(os.WEXITSTATUS(status))


def become(libc: ctypes.CDLL, uid: int, gid: int) -> None:
    if libc.setgroups(0, None) != 0:
        _fail("setgroups")
    if libc.setresgid(gid, gid, gid) != 0:
        _fail(f"setresgid({gid})")
    if libc.setresuid(uid, uid, uid) != 0:
        _fail(f"setresuid({uid})")


def mount_overlay(libc: ctypes.CDLL, value: str) -> None:
    lower, point, size, owner = value.rsplit(":", 3)
    layer = point + ".layer"
    os.makedirs(layer, mode=0o700, exist_ok=True)
    os.makedirs(point, mode=0o755, exist_ok=True)
    if libc.mount(b"tmpfs", layer.encode(), b"tmpfs", 0, f"size={int(size)},mode=0700".encode()) != 0:
        _fail(f"tmpfs for the writable layer at {layer}")
    upper, work = f"{layer}/upper", f"{layer}/work"
    os.mkdir(upper)
    os.mkdir(work)
    os.chmod(upper, os.stat(lower).st_mode & 0o7777)
    os.chown(upper, int(owner), int(owner))
    os.chmod(layer, 0o755)
    opts = f"lowerdir={lower},upperdir={upper},workdir={work}".encode()
    if libc.mount(b"overlay", point.encode(), b"overlay", 0, opts) != 0:
        _fail(f"overlay of {lower} at {point}")


def run_step(libc: ctypes.CDLL, flag: str, value: str) -> None:
    if flag == "--become":
        uid, _, gid = value.partition(":")
        become(libc, int(uid), int(gid or uid))
    elif flag == "--userns":
        if libc.setns(int(value), CLONE_NEWUSER) != 0:
            _fail("setns(user)")
    elif flag == "--setns":
        if libc.setns(int(value), 0) != 0:
            _fail(f"setns(fd {value})")
    elif flag == "--root":
        os.fchdir(int(value))
        if libc.chroot(b".") != 0:
            _fail("chroot")
        os.chdir("/")
    elif flag == "--drop-caps":
        drop_all_capabilities(libc)
    elif flag == "--private-mounts":
        if libc.unshare(CLONE_NEWNS) != 0:
            _fail("unshare(mount)")
        if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
            _fail("making / private")
    elif flag == "--overlay":
        mount_overlay(libc, value)
    elif flag == "--bind":
        src, dst = value.split("\0")
        if libc.mount(src.encode(), dst.encode(), None, MS_BIND | MS_REC, None) != 0:
            _fail(f"bind {src} -> {dst}")
    else:
        sys.exit(f"harnessrl sandbox entry: unknown option {flag}")


def main(args: list[str]) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    sep = args.index("--")
    opts, argv = args[:sep], args[sep + 1 :]
    steps: list[tuple[str, str]] = []
    seccomp, fork = None, False
    i = 0
    while i < len(opts):
        flag = opts[i]
        if flag in ("--fork", "--drop-caps", "--private-mounts"):
            fork = fork or flag == "--fork"
            if flag != "--fork":
                steps.append((flag, ""))
            i += 1
            continue
        value = opts[i + 1]
        if flag == "--bind":  # two values
            steps.append((flag, f"{value}\0{opts[i + 2]}"))
            i += 3
            continue
        if flag == "--seccomp":  # read now: the file is on the host, out of reach after chroot
            with open(value, "rb") as f:
                seccomp = f.read()
        else:
            steps.append((flag, value))
        i += 2
    for flag, value in steps:
        run_step(libc, flag, value)
    if _prctl(libc, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        _fail("no_new_privs")
    if seccomp is not None:
        load_seccomp(libc, seccomp)
    if fork:
        pid = os.fork()
        if pid:
            _wait_and_exit(pid)
    _exec(argv)


def _exec(argv: list[str]) -> None:
    """execvp without os.execvp's lazy imports (after --become, the interpreter's own files may
    be unreadable: a base installation under /root)."""
    if "/" in argv[0]:
        os.execv(argv[0], argv)
    for d in os.environ.get("PATH", "/usr/bin:/bin").split(":"):
        try:
            os.execv(f"{d or '.'}/{argv[0]}", argv)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
    sys.exit(f"harnessrl sandbox entry: {argv[0]}: not found on PATH")


if __name__ == "__main__":
    main(sys.argv[1:])
