"""Host budgets that add up (issue 39): /dev/shm and /dev are bounded per sandbox, a harness's
output costs the host a bounded buffer (no file), and concurrency x memory_mb fits the host.

The bwrap cases run real bubblewrap; each has a control that shows the same writer succeeds where
the defence does not apply (the attack would pay without it).
"""

from __future__ import annotations

import logging
import shutil

import pytest

from harnessrl.sandbox import SandboxConfig, make_sandbox
from harnessrl.sandbox.health import fit_concurrency
from harnessrl.sandbox.process import run_to_completion

BWRAP = pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bubblewrap: apt-get install bubblewrap")
CFG = SandboxConfig(type="bwrap", memory_mb=1024, max_procs=128, scratch_mb=256, shm_mb=16)
FILL = "head -c {mb}M /dev/zero > {path} && echo wrote || echo refused"


@pytest.mark.bwrap
@BWRAP
def test_dev_shm_is_a_small_tmpfs_and_dev_is_read_only():
    with make_sandbox(CFG) as sb:
        small = sb.run(["sh", "-c", FILL.format(mb=1, path="/dev/shm/small")])
        shm = sb.run(["sh", "-c", FILL.format(mb=64, path="/dev/shm/big")])
        tmp = sb.run(["sh", "-c", FILL.format(mb=64, path="/tmp/big")])  # control: the same write pays elsewhere
        dev = sb.run(["sh", "-c", FILL.format(mb=1, path="/dev/big")])
        size = sb.run(["sh", "-c", "df -k /dev/shm | tail -1"])
    assert shm.stdout.strip() == "refused" and "No space left" in shm.stderr
    assert tmp.stdout.strip() == "wrote"
    assert dev.stdout.strip() == "refused" and "Read-only" in dev.stderr
    assert small.stdout.strip() == "wrote"  # shared memory still works, within its size
    assert int(size.stdout.split()[1]) == 16 * 1024


@pytest.mark.bwrap
@BWRAP
def test_a_flood_of_output_keeps_head_and_tail_and_reaches_no_host_file():
    cfg = CFG.model_copy(update={"max_output_bytes": 1 << 20})
    # the harness may write at most 512 KiB to any file: a host file behind its stdout would stop it
    flood = "ulimit -f 1024; echo FIRST; head -c 64M /dev/zero | tr '\\0' x; echo; echo LAST"
    with make_sandbox(cfg) as sb:
        res = sb.run(["sh", "-c", flood], timeout_s=120)
    assert res.ok, res.stderr[-300:]
    assert res.stdout.startswith("FIRST\n") and res.stdout.endswith("x\nLAST\n")
    assert "bytes of output dropped here]" in res.stdout
    assert res.output_dropped > (64 << 20) - (2 << 20)
    assert len(res.stdout) < (1 << 20) + (128 << 10)


def test_control_a_file_behind_stdout_stops_the_same_flood(tmp_path):
    """What the capture replaced: stdout into a host file, bounded only by the file-size limit."""
    res = run_to_completion(["sh", "-c", "ulimit -f 1024; head -c 4M /dev/zero"], env={"PATH": "/usr/bin:/bin"},
                            cwd=None, timeout_s=60, stdout_path=tmp_path / "out")
    assert not res.ok and (tmp_path / "out").stat().st_size < 4 << 20


def test_concurrency_is_lowered_to_what_the_hosts_memory_holds(caplog):
    with caplog.at_level(logging.WARNING, logger="harnessrl.sandbox.health"):
        assert fit_concurrency(8, 4096, host_mib=24 * 1024) == 6
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and "from 8 to 6" in lines[0] and "24576 MiB" in lines[0]
    caplog.clear()
    assert fit_concurrency(4, 4096, host_mib=24 * 1024) == 4  # control: what fits is unchanged
    assert fit_concurrency(8, None, host_mib=1024) == 8  # no memory limit: nothing to add up
    assert fit_concurrency(3, 64 * 1024, host_mib=24 * 1024) == 1  # never below one
    assert fit_concurrency(8, 1, host_mib=0) == 8  # the host does not say: unchanged
    assert len(caplog.records) == 1
