"""Host-side entry into a bwrap sandbox (run as ``python -I -S entry_helper.py``).

    entry_helper.py [--setns FD]... [--root FD] [--userns FD] [--seccomp BPF_FILE] [--fork] -- argv...

Standard library only (it runs in an isolated interpreter before the sandbox's root is entered),
single-threaded; the steps run in this order, then argv is ``exec``-ed:

1. ``--setns FD`` (repeated): join these namespaces (mount, uts, ipc, net, pid, cgroup) while
   still in the host's user namespace, whose root may join any of them.
2. ``--root FD``: ``fchdir`` + ``chroot`` to the sandbox's root directory (what ``nsenter
   --root`` does).
3. ``--userns FD``: join the sandbox user's namespace LAST, then empty the capability bounding
   set and every capability set. Joining a user namespace resets the bounding set to full, and
   the sandbox uid is not 0 there, so an ``exec`` in between would clear the capabilities that
   dropping the bounding set needs: that is why ``nsenter`` + ``setpriv`` left commands with a
   full bounding set, and why this helper replaces both when the host user is root.
4. no_new_privs; ``--seccomp FILE``: load the BPF program in FILE (sandbox/seccomp.py;
   read before step 1).
5. ``--fork``: the command runs in a child (the only way into a pid namespace); this process
   waits for it and exits with its status (a child killed by a signal: 128 + the signal).
"""

from __future__ import annotations

import ctypes
import os
import sys

CLONE_NEWUSER = 0x10000000
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


def _prctl(libc: ctypes.CDLL, option: int, *args) -> int:
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


def main(args: list[str]) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    sep = args.index("--")
    opts, argv = args[:sep], args[sep + 1 :]
    setns, root, userns, seccomp, fork = [], None, None, None, False
    i = 0
    while i < len(opts):
        flag = opts[i]
        if flag == "--fork":
            fork, i = True, i + 1
            continue
        value = opts[i + 1]
        if flag == "--setns":
            setns.append(int(value))
        elif flag == "--root":
            root = int(value)
        elif flag == "--userns":
            userns = int(value)
        elif flag == "--seccomp":  # read now: the file is on the host, out of reach after chroot
            with open(value, "rb") as f:
                seccomp = f.read()
        else:
            sys.exit(f"harnessrl sandbox entry: unknown option {flag}")
        i += 2
    for fd in setns:
        if libc.setns(fd, 0) != 0:
            _fail(f"setns(fd {fd})")
    if root is not None:
        os.fchdir(root)
        if libc.chroot(b".") != 0:
            _fail("chroot")
        os.chdir("/")
    if userns is not None:
        if libc.setns(userns, CLONE_NEWUSER) != 0:
            _fail("setns(user)")
        drop_all_capabilities(libc)
    if _prctl(libc, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:  # always (setpriv did it before)
        _fail("no_new_privs")
    if seccomp is not None:
        load_seccomp(libc, seccomp)
    if fork:
        pid = os.fork()
        if pid:
            _wait_and_exit(pid)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main(sys.argv[1:])
