"""How a command enters a running bwrap sandbox: the host-side argv in front of it.

    sh (ulimits, joins the run's cgroups) -> [prlimit] -> entry ... -> env -C <cwd> -> command

The entry, through namespace fds the sandbox object holds (never by pid, which could be reused):
- host user root (here): ``python entry_helper.py`` joins the namespaces and the root, then the
  sandbox user's namespace, empties every capability set including the bounding set, loads the
  seccomp filter and forks the command into the pid namespace.
- otherwise: the seccomp filter is loaded first (entry_helper), then ``nsenter`` enters the
  outer user namespace with the others and, from inside, the nested one, and ``setpriv`` drops
  the capabilities and sets no_new_privs. The bounding set stays full on this path (joining a
  user namespace resets it and the exec after it drops the right to cut it); without
  capabilities, with no_new_privs and a filter that refuses new user namespaces, it grants
  nothing.
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


def nsenter_argv(fds: dict[str, int]) -> list[str]:
    """The non-root entry: nsenter through the held namespace fds, outer then nested user ns."""
    path = "/proc/self/fd/{}".format
    others = [f"--{flag}={path(fds[ns])}" for ns, flag in NAMESPACES.items() if ns != "user"]
    return [
        "nsenter",
        f"--user={path(fds['outer_user'])}",
        *others,
        f"--root={path(fds['root'])}",
        "--preserve-credentials",
        "--",
        "nsenter",
        f"--user={path(fds['user'])}",
        "--preserve-credentials",
        "--",
    ]


def entry_argv(fds: dict[str, int], *, seccomp_bpf: Path | None) -> list[str]:
    """Everything between the cgroup join and ``env -C``: see the module docstring."""
    helper = [sys.executable, "-I", "-S", entry_helper.__file__]
    helper += ["--seccomp", str(seccomp_bpf)] if seccomp_bpf is not None else []
    if "outer_user" in fds:
        return helper + ["--"] + nsenter_argv(fds) + DROP_PRIVS
    for ns in NAMESPACES:
        if ns != "user":
            helper += ["--setns", str(fds[ns])]
    return helper + ["--root", str(fds["root"]), "--userns", str(fds["user"]), "--fork", "--"]


def entry_wrapper(join_files: list[Path], rlimits: list[str], fsize_mb: int) -> list[str]:
    cmd = ["sh", "-c", JOIN_CGROUPS, "sh", str(fsize_mb * 2048), *map(str, join_files), "--"]
    return cmd + (["prlimit", *rlimits, "--"] if rlimits else [])
