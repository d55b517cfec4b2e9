"""`harnessrl rollout --proxy`: the rollouts are stored with their calls, in the proxy's own run
directory; another --run-dir, or a serving flag the running proxy cannot honour, is refused."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harnessrl.app.main import app
from harnessrl.proxy.server import ProxyServer
from harnessrl.rollout.proxy_link import ProxyLinkError, RemoteProxy
from harnessrl.app.proxy_session import proxy_run_dir
from harnessrl.store import RunStore
from tests.proxy.fakes import TextScriptEngine

AGENT = Path(__file__).with_name("summariser_agent.py")  # two calls, both served here


@pytest.fixture
def running(renderer, tmp_path):
    store = RunStore(tmp_path / "served")
    server = ProxyServer(TextScriptEngine(renderer.encode, renderer.eot_id), store, renderer).start()
    yield server, f"http://127.0.0.1:{server.port}"
    server.stop()
    store.close()


def rollout_args(url, token, *extra):
    return ["rollout", "--proxy", url, "--admin-token", token, "--harness", f"command:{sys.executable} {AGENT}",
            "--tasks", "builtin:write_word:test", "-n", "1", "--sandbox", "local", *extra]


def test_rollouts_land_in_the_proxys_run_dir_with_their_calls(running, tmp_path):
    server, url = running
    r = CliRunner().invoke(app, rollout_args(url, server.admin_token))
    assert r.exit_code == 0, r.output
    with RunStore(tmp_path / "served") as store:
        rollouts = store.list_rollouts()
        assert len(rollouts) == 8 and all(x.call_count == 2 for x in rollouts)  # every call found
        assert all(x.meta["attempts"] == 1 for x in rollouts)  # never re-run for want of calls


def test_another_run_dir_is_refused_before_anything_runs(running, tmp_path):
    server, url = running
    r = CliRunner().invoke(app, rollout_args(url, server.admin_token, "--run-dir", str(tmp_path / "elsewhere")))
    assert r.exit_code == 2 and "records its calls in" in r.output and "--run-dir" in r.output
    assert not (tmp_path / "elsewhere").exists()
    info = RemoteProxy(url, server.admin_token).check().info()
    assert proxy_run_dir(None, info, url) == (tmp_path / "served").resolve()
    assert proxy_run_dir(tmp_path / "served", info, url) == (tmp_path / "served").resolve()
    with pytest.raises(ProxyLinkError, match="records its calls in"):
        proxy_run_dir(tmp_path / "x", info, url)


@pytest.mark.parametrize("flag", [["--max-tokens", "64"], ["--tool-format", "bash"], ["--default-temperature", "0.7"],
                                  ["--temperature-mode", "force"], ["--engine", "hf"]])
def test_serving_flags_are_rejected_with_proxy(flag):
    r = CliRunner().invoke(app, ["rollout", "--proxy", "http://127.0.0.1:9", "--admin-token", "t", *flag])
    assert r.exit_code == 2 and flag[0] in r.output and "cannot apply with --proxy" in r.output


def test_info_needs_the_admin_token(running):
    server, url = running
    with pytest.raises(ProxyLinkError, match="admin-token"):
        RemoteProxy(url, "wrong").info()
