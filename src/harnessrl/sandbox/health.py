"""Is the host still fit to run rollouts? A cheap check before every batch (each training step).

A sandbox shares the host's device nodes and kernel. Before the sandbox user was an unprivileged
host uid, a 135M base model, exploring, ran `chmod +x /dev/null` and broke every later rollout
on the machine; the runner then blamed the harness install. This check names the cause instead:

- ``check_host_devices()``: the host's basic device nodes are character devices that everyone
  may read and write (``crw-rw-rw-``), as every program, bwrap included, expects;
- ``preflight(cfg)``: that, then (bwrap) one sandbox starts and uses those devices from inside.
  Creating it sweeps the scratch dirs of dead sandbox owners (bwrap.sweep_scratch_dirs:
  iterative, bounded, never raises); one that cannot be removed is renamed ``harnessrl-sbx-stale-*``,
  skipped from then on, and named in a warning here (``stale_scratch_dirs``), never a crash.

Both raise HostUnfit (a SandboxUnavailable) whose message says what is wrong and how to fix it.

- ``fit_concurrency(concurrency, memory_mb)``: how many sandboxes may run at once so that their
  memory limits add up to no more than the host's memory; lowered with one log line saying why.
"""

from __future__ import annotations

import logging
import os
import stat
import tempfile
from pathlib import Path

from harnessrl.sandbox.base import SandboxConfig, SandboxError, SandboxUnavailable

DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
PROBE = "echo probe > /dev/null && head -c 8 /dev/urandom > /dev/null && head -c 8 /dev/zero > /dev/null && echo ok"


log = logging.getLogger(__name__)


class HostUnfit(SandboxUnavailable):
    """The host cannot run rollouts as it is (a damaged device node, a sandbox that cannot start)."""


def check_host_devices(devices: tuple[str, ...] | None = None) -> None:
    """HostUnfit naming every basic device node (DEVICES) that is missing, not a character device
    or not read-writable by everyone."""
    problems = []
    for path in devices if devices is not None else DEVICES:
        try:
            st = os.stat(path)
        except OSError as e:
            problems.append(f"{path} is missing ({e.strerror})")
            continue
        if not stat.S_ISCHR(st.st_mode):
            problems.append(f"{path} is not a character device (mode {stat.filemode(st.st_mode)})")
        elif st.st_mode & 0o666 != 0o666:
            problems.append(f"{path} is {stat.filemode(st.st_mode)}, not crw-rw-rw-: restore it with "
                            f"`chmod 666 {path}` (as root)")
    if problems:
        raise HostUnfit("this host cannot run rollouts: " + "; ".join(problems) + ". Something on the host "
                        "changed it (harnessrl's bwrap sandbox cannot: its user owns no host device node).")


def preflight(cfg: SandboxConfig | None = None) -> None:
    """The host's device nodes, then (bwrap) one sandbox that starts and uses them. ~0.1 s."""
    from harnessrl.sandbox.factory import make_sandbox

    cfg = cfg or SandboxConfig()
    check_host_devices()
    if cfg.type != "bwrap":
        return
    stale = stale_scratch_dirs(Path(tempfile.gettempdir()))
    if stale:
        log.warning("%d sandbox scratch dir(s) could not be removed and are skipped (delete them as root): %s",
                    len(stale), ", ".join(stale[:5]))
    try:
        with make_sandbox(cfg) as sb:
            res = sb.run(["sh", "-c", PROBE], timeout_s=60)
    except SandboxUnavailable:
        raise
    except SandboxError as e:
        raise HostUnfit(f"a sandbox does not start on this host: {e}") from None
    if not res.ok or res.stdout.strip() != "ok":
        raise HostUnfit(f"a sandbox starts but cannot use its basic devices (exit {res.returncode}): "
                        f"{res.stderr.strip()[-400:]}")


def stale_scratch_dirs(tmp: Path) -> list[str]:
    """Scratch dirs of dead sandbox owners that a sweep could not remove (bwrap.STALE_PREFIX)."""
    from harnessrl.sandbox.bwrap import STALE_PREFIX

    try:
        return sorted(str(p) for p in tmp.glob(STALE_PREFIX + "*"))
    except OSError:
        return []


def host_memory_mib() -> int:
    """The host's physical memory in MiB (0 when the system does not say)."""
    try:
        return (os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")) >> 20
    except (ValueError, OSError):
        return 0


def fit_concurrency(concurrency: int, memory_mb: int | None, host_mib: int | None = None) -> int:
    """``concurrency``, or fewer when ``memory_mb`` x ``concurrency`` (each sandbox's memory limit,
    tmpfs pages included) exceeds the host's memory ``host_mib`` (default: this host's): then the
    most that fit, at least 1, with one warning naming the numbers. No limit (None): unchanged."""
    host = host_memory_mib() if host_mib is None else host_mib
    if not memory_mb or host <= 0 or memory_mb * concurrency <= host:
        return concurrency
    fits = max(1, host // memory_mb)
    log.warning("concurrency lowered from %d to %d: %d sandboxes x memory_mb %d MiB = %d MiB exceed this "
                "host's %d MiB of memory (lower sandbox memory_mb to run more at once)",
                concurrency, fits, concurrency, memory_mb, concurrency * memory_mb, host)
    return fits
