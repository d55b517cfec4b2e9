"""A harness's memory floor (HarnessAdapter.memory_floor_mb) raises a run's smaller sandbox limit
for that harness's rollouts only, and the concurrency is fitted to the largest limit in use."""

from __future__ import annotations

from harnessrl.harness import make_harness
from harnessrl.rollout.jobs import sandbox_config_for
from harnessrl.sandbox.base import SandboxConfig
from harnessrl.sandbox.health import fit_concurrency


def test_openclaw_gateway_gets_its_floor_and_others_keep_the_run_limit():
    cfg = SandboxConfig(type="bwrap")
    assert cfg.memory_mb == 1536
    assert sandbox_config_for(cfg, make_harness("openclaw:gateway")).memory_mb == 3072
    assert sandbox_config_for(cfg, make_harness("openclaw")).memory_mb == 2048
    assert sandbox_config_for(cfg, make_harness("claude-code")).memory_mb == 1536
    assert sandbox_config_for(cfg, make_harness("builtin")).memory_mb == 1536


def test_a_larger_run_limit_or_no_limit_is_kept():
    big = SandboxConfig(type="bwrap", memory_mb=8192)
    assert sandbox_config_for(big, make_harness("openclaw:gateway")).memory_mb == 8192
    unlimited = SandboxConfig(type="bwrap", memory_mb=None)
    assert sandbox_config_for(unlimited, make_harness("openclaw:gateway")).memory_mb is None


def test_concurrency_fits_the_floor():
    # 8 gateway sandboxes at 3072 MiB do not fit 16 GiB; at the run's 1536 they would
    assert fit_concurrency(8, 1536, host_mib=16384) == 8
    assert fit_concurrency(8, 3072, host_mib=16384) == 5
