"""How a command enters a running bwrap sandbox: the host-side argv in front of it.

    sh (ulimits, joins the run's cgroups) -> [prlimit] -> entry_helper.py ... -> env -C <cwd> -> command

The entry goes through namespace fds the sandbox object holds (never by pid, which could be
reused), in this order (entry_helper.py runs the steps):

1. host user root: ``--become host_uid`` first. bwrap ran as that unprivileged uid, so it owns
   the sandbox's namespaces; the command is never host root, not even a capability-less one
   (which would own /dev/null and /proc/sys).
2. the outermost user namespace of the sandbox (bwrap nests one in its own when the sandbox uid
   is not 0): full capabilities there, which the next steps need;
3. the mount, uts, ipc, net, pid and cgroup namespaces, then the sandbox's root;
4. the sandbox user's (nested) namespace, then every capability set emptied, bounding set
   included, no_new_privs and the seccomp filter; the command is forked into the pid namespace.
"""

from __future__ import annotations

import sys
from pathlib import Path

from harnessrl.sandbox import entry_helper

# Sets the file-size limit (512-byte blocks) and no core files, writes its pid into each
# cgroup.procs given before "--", then execs the rest.
JOIN_CGROUPS = (
    'ulimit -c 0; ulimit -f "$1" || exit 125; shift; '
    'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
)
NS_GET_PARENT = 0xB702  # ioctl on a namespace fd: its parent user namespace
NAMESPACES = {
    "user": "user",
    "mnt": "mount",
    "uts": "uts",
    "ipc": "ipc",
    "net": "net",
    "pid": "pid",
    "cgroup": "cgroup",
}


def entry_argv(fds: dict[str, int], *, seccomp_bpf: Path | None, host_uid: int | None = None) -> list[str]:
    """Everything between the cgroup join and ``env -C``: see the module docstring.

    ``fds``: namespace name -> fd (NAMESPACES, "root", and "outer_user" when bwrap nested the
    sandbox user's namespace in its own); ``host_uid``: the uid to become first (host root only).
    """
    helper = [sys.executable, "-I", "-S", entry_helper.__file__]
    helper += ["--seccomp", str(seccomp_bpf)] if seccomp_bpf is not None else []
    if host_uid is not None:
        helper += ["--become", f"{host_uid}:{host_uid}"]
    helper += ["--userns", str(fds.get("outer_user", fds["user"]))]
    for ns in NAMESPACES:
        if ns != "user":
            helper += ["--setns", str(fds[ns])]
    helper += ["--root", str(fds["root"])]
    if "outer_user" in fds:
        helper += ["--userns", str(fds["user"])]
    return helper + ["--drop-caps", "--fork", "--"]


def entry_wrapper(join_files: list[Path], rlimits: list[str], fsize_mb: int) -> list[str]:
    cmd = ["sh", "-c", JOIN_CGROUPS, "sh", str(fsize_mb * 2048), *map(str, join_files), "--"]
    return cmd + (["prlimit", *rlimits, "--"] if rlimits else [])
