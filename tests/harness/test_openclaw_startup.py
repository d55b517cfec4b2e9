"""OpenClaw's start-up settings (issue 43 item 3): every profile runs one Node process
(OPENCLAW_NO_RESPAWN), and only `small`, whose first request is the same without them, skips the
bundled plugins. The measured effect is in docs/benchmarks.md (benchmarks/warm_pool.py)."""

from __future__ import annotations

from harnessrl.harness import make_harness
from harnessrl.harness.base import RunDirs, RunRequest


def env_of(spec: str) -> dict[str, str]:
    req = RunRequest(instruction="Write 'hi' into a.txt", proxy_base="http://127.0.0.1:4321/r/k", api_key="k",
                     model="policy", timeout_s=120.0, max_turns=7, workdir="/workspace", dirs=RunDirs("abc123"))
    return make_harness(spec).build(req).env


def test_every_profile_runs_one_node_process():
    for spec in ("openclaw", "openclaw:lean", "openclaw:small", "openclaw:gateway", "openclaw:gateway-small"):
        assert env_of(spec)["OPENCLAW_NO_RESPAWN"] == "1", spec


def test_only_small_skips_the_bundled_plugins():
    assert env_of("openclaw:small")["OPENCLAW_DISABLE_BUNDLED_PLUGINS"] == "1"
    for spec in ("openclaw", "openclaw:lean", "openclaw:gateway", "openclaw:gateway-small"):
        assert "OPENCLAW_DISABLE_BUNDLED_PLUGINS" not in env_of(spec), spec  # their prompts list plugin skills
