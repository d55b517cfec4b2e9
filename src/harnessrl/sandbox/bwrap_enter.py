"""How a command enters a running bwrap sandbox: the host-side argv in front of it.

sh (ulimits, joins the run's cgroups) -> [prlimit] -> nsenter (the sandbox's namespaces and
root, through namespace fds the sandbox object holds) -> setpriv (no capabilities,
no_new_privs) -> env -C <cwd> -> the command
"""

from __future__ import annotations

from pathlib import Path

# Sets the file-size limit (512-byte blocks) and no core files, writes its pid into each
# cgroup.procs given before "--", then execs the rest.
JOIN_CGROUPS = (
    'ulimit -c 0; ulimit -f "$1" || exit 125; shift; '
    'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
)
DROP_PRIVS = [
    "setpriv",
    "--no-new-privs",
    "--inh-caps=-all",
    "--ambient-caps=-all",
    "--bounding-set=-all",
    "--",
]
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


def enter_argv(fds: dict[str, int]) -> list[str]:
    """nsenter through the held namespace fds.

    bwrap nests a second user namespace (the sandbox uid's) inside the one that owns the other
    namespaces. Root may enter everything directly. Others enter the outer user namespace first
    (which grants the rights over mount/net/...), then, from inside, the nested one.
    """
    path = "/proc/self/fd/{}".format
    if "outer_user" not in fds:
        users, nested = [f"--user={path(fds['user'])}"], []
    else:
        users = [f"--user={path(fds['outer_user'])}"]
        nested = ["nsenter", f"--user={path(fds['user'])}", "--preserve-credentials", "--"]
    others = [f"--{flag}={path(fds[ns])}" for ns, flag in NAMESPACES.items() if ns != "user"]
    return [
        "nsenter",
        *users,
        *others,
        f"--root={path(fds['root'])}",
        "--preserve-credentials",
        "--",
        *nested,
    ]


def entry_wrapper(join_files: list[Path], rlimits: list[str], fsize_mb: int) -> list[str]:
    cmd = ["sh", "-c", JOIN_CGROUPS, "sh", str(fsize_mb * 2048), *map(str, join_files), "--"]
    return cmd + (["prlimit", *rlimits, "--"] if rlimits else [])
