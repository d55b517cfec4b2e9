"""How a bwrap sandbox starts (sandbox/bwrap.py's `BwrapSandbox._start`): the tools it needs, the
keeper that is the sandbox's init, the staging of host paths (and an image's overlay) as root, the
seccomp filter or the rlimits that stand in for cgroups, the start handshake over bwrap's info and
block fds, the in-sandbox listener helper, and the host scratch dirs of owners that died."""

from __future__ import annotations

import json
import logging
import os
import select
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from harnessrl.sandbox import entry_helper, rootfs
from harnessrl.sandbox.base import SandboxConfig, SandboxError, SandboxUnavailable
from harnessrl.sandbox.bwrap_mounts import host_binds, sandbox_cache_dir
from harnessrl.sandbox.seccomp import SeccompUnavailable, cached_filter
from harnessrl.sandbox.treeops import remove_tree, sweep_dead_owners

T = TypeVar("T")

log = logging.getLogger("harnessrl.sandbox.bwrap")  # the sandbox's one logger

START_TIMEOUT_S = 30.0
SCRATCH_PREFIX = "harnessrl-sbx-"  # + <owner pid>-<random>: host-side scratch dir per sandbox
# The keeper is the sandbox's pid 1 (bwrap --as-pid-1): the kernel delivers no signal from inside
# the pid namespace to its init unless the init handles that signal, so `kill -9 -1` (or `kill -9 1`)
# from a harness ends the harness but not the sandbox, and its workspace can still be scored. bash
# reaps orphans even while it waits in `read` (zombies would count against max_procs); the traps
# ignore the signals it would otherwise handle. It says "ready", and when its pipe from this process
# closes (destroy, or this process died) SIGKILLs everything in the sandbox and exits.
KEEPER = "trap '' INT TERM HUP QUIT USR1 USR2 ALRM PIPE; echo ready; read -r _; kill -KILL -1"
SH_KEEPER = "echo ready; read _; kill -KILL -1"  # without bash: pid 2, under bwrap's own init
# Run inside (python -I -c ... PORT FD): listen on 127.0.0.1:PORT, pass the socket out over FD.
LISTEN_HELPER = (
    "import socket, sys\n"
    "s = socket.socket()\n"
    "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind(('127.0.0.1', int(sys.argv[1])))\n"
    "s.listen(64)\n"
    "socket.send_fds(socket.socket(fileno=int(sys.argv[2])), [b'L'], [s.fileno()])\n"
)


def _require_tools() -> None:
    if shutil.which("bwrap") is None:
        raise SandboxUnavailable(
            "sandbox type 'bwrap' needs `bwrap`: install it (apt-get install -y bubblewrap) "
            "or use type='local' (no isolation)"
        )


def as_fs_user(uid: int, gid: int, fn: Callable[[], object]) -> None:
    """Run ``fn()`` (host root) in a thread of its own whose file-system uid and gid are these:
    files it creates are theirs. Linux keeps fsuid per thread (glibc's setfsuid does not touch
    the other threads); the thread raises its effective capabilities again after the switch, so
    it still reads root's files. Re-raises what ``fn`` raised."""
    box: list[BaseException] = []

    def body() -> None:
        try:
            entry_helper.set_fs_user(uid, gid)
            fn()
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller
            box.append(e)

    t = threading.Thread(target=body, name="sandbox-fs-user")
    t.start()
    t.join()
    if box:
        raise box[0]


def _read_until(fd: int, done: Callable[[bytes], T | None], timeout_s: float) -> T:
    """Read ``fd`` until ``done(data)`` returns a value; SandboxError on EOF or timeout."""
    data, deadline = b"", time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if not ready:
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
        value = done(data)
        if value is not None:
            return value
    raise SandboxError("bwrap did not start")


def _json_or_none(data: bytes) -> dict | None:
    try:
        return json.loads(data)
    except ValueError:
        return None


STALE_PREFIX = SCRATCH_PREFIX + "stale-"  # a dead owner's scratch dir that could not be removed


def sweep_scratch_dirs(tmp: Path) -> list[str]:
    """Remove host scratch dirs left by sandbox owners that died before destroy(); never raises.
    One that cannot be removed is renamed STALE_PREFIX..., skipped from then on (treeops.py)."""
    return sweep_dead_owners(tmp, SCRATCH_PREFIX, STALE_PREFIX, remove=remove_tree)


_sweep_scratch_dirs = sweep_scratch_dirs  # its older name


def _start_error(msg: str) -> SandboxError:
    """bwrap's start failure; namespaces refused by the host are SandboxUnavailable with the fix."""
    denied = ("Permission denied", "Operation not permitted", "No permissions to create")
    if any(d in msg for d in denied):
        return SandboxUnavailable(
            f"bwrap cannot create namespaces here ({msg}). Run as root, or allow unprivileged user "
            "namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu >= 23.10 also "
            "kernel.apparmor_restrict_unprivileged_userns=0), or use type='local' (no isolation)."
        )
    return SandboxError(f"bwrap failed to start: {msg}")


def seccomp_filter(cfg: SandboxConfig) -> Path | None:
    """The cached seccomp filter (sandbox.seccomp), or None with a warning where it cannot be built."""
    if not cfg.seccomp:
        return None
    try:
        return cached_filter(sandbox_cache_dir())
    except (SeccompUnavailable, OSError) as e:
        log.warning("sandbox runs WITHOUT a seccomp filter: %s", e)
        return None


def fallback_rlimits(cfg: SandboxConfig) -> list[str]:
    """prlimit's arguments where cgroups are not writable (weaker limits, with a warning)."""
    log.warning("cgroups not writable here: sandbox limits fall back to rlimits (weaker)")
    out = [f"--as={cfg.memory_mb << 20}"] if cfg.memory_mb else []
    return out + ([f"--nproc={cfg.max_procs}"] if cfg.max_procs else [])


def keeper_argv(root: str | None) -> tuple[list[str], bool]:
    """(the keeper's argv, whether it is pid 1): bash as pid 1 (KEEPER), or without bash the
    shell keeper under bwrap's own init (then a harness can end its sandbox). `root`: the
    sandbox's image root (sandbox.rootfs), None for the host's."""
    if root is not None and (rootfs.has_program(root, "/bin/bash") or rootfs.has_program(root, "/usr/bin/bash")):
        return ["bash", "--norc", "--noprofile", "-c", KEEPER], True
    if root is None and (os.path.exists("/bin/bash") or os.path.exists("/usr/bin/bash")):
        return ["bash", "--norc", "--noprofile", "-c", KEEPER], True
    return ["sh", "-c", SH_KEEPER], False


def stage_argv(cfg: SandboxConfig, scratch: Path, host_uid: int | None) -> tuple[dict[str, str], list[str]]:
    """As root (`host_uid` set): (host path -> staged path, the argv prefix that stages them and
    becomes host_uid before bwrap). The prefix makes a private mount namespace for bwrap and binds
    each host path onto an empty mount point under the sandbox's `scratch` dir, which the
    unprivileged uid can traverse. Not root: nothing to stage. On a ``cfg.rootfs`` the prefix also
    mounts the image's overlay (rootfs.py), bound as / by bwrap_argv."""
    if cfg.rootfs is not None:
        rootfs.check_root(cfg.rootfs)
        if host_uid is None:
            raise SandboxUnavailable("a sandbox on an image root (sandbox.rootfs) needs harnessrl to run as "
                                     "root here: its per-rollout writable layer is an overlay mount")
    if host_uid is None:
        return {}, []
    stage = scratch / "stage"
    stage.mkdir()
    scratch.chmod(0o711)
    stage.chmod(0o755)
    staged: dict[str, str] = {}
    prefix = [sys.executable, "-I", "-S", entry_helper.__file__, "--private-mounts"]
    for host, _ in host_binds(cfg):
        if host in staged:
            continue
        point = stage / str(len(staged))
        if os.path.isdir(host):
            point.mkdir(mode=0o755)
        else:
            point.touch(mode=0o644)
        staged[host] = str(point)
        prefix += ["--bind", host, str(point)]
    if cfg.rootfs is not None:
        staged[cfg.rootfs] = str(stage / "root")
        prefix += rootfs.overlay_step(cfg, str(stage / "root"), host_uid)
    return staged, prefix + ["--become", f"{host_uid}:{host_uid}", "--"]
