"""Fakes for the harness tests: a sandbox that runs processes locally (no isolation)."""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass
class FakeResult:
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float


class LocalFakeSandbox:
    """Runs argv as a local subprocess with a private HOME; kills only the direct child on timeout
    (so the tests show that the launcher, not the sandbox, kills the whole tree)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.inner_workspace = str(root / "workspace")
        self.home = root / "home"
        for d in (self.inner_workspace, self.home, root / "tmp"):
            Path(d).mkdir(parents=True, exist_ok=True)
        self.calls: list[dict] = []

    def run(self, argv, *, env=None, cwd=None, timeout_s=None):
        base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home),
                "TMPDIR": str(self.root / "tmp")}
        self.calls.append({"argv": argv, "env": env, "cwd": cwd, "timeout_s": timeout_s})
        t0 = time.monotonic()
        try:
            p = subprocess.run(argv, env=base | (env or {}), cwd=cwd or self.inner_workspace,
                               capture_output=True, text=True, timeout=timeout_s)
            return FakeResult(p.returncode, p.stdout, p.stderr, False, time.monotonic() - t0)
        except subprocess.TimeoutExpired as e:
            return FakeResult(None, e.stdout or "", e.stderr or "", True, time.monotonic() - t0)


@pytest.fixture
def fake_sandbox(tmp_path: Path) -> LocalFakeSandbox:
    return LocalFakeSandbox(tmp_path)


# ---- real-harness tier: a real proxy + store + renderer, with a scripted policy ---------------

FINAL_ANSWER = "Done: wrote hello.txt."
TASK = "Write the word hello into the file hello.txt in the current directory."
# what tells the policy that its tool call was answered (in the rendered tail of the prompt)
_ANSWERED = {"mini-swe-agent": "<returncode>", "builtin": "Exit code", "command": "\x00never"}


def first_action(harness: str, tool_format: str, cmd: str | None = None) -> str:
    """The scripted policy's first reply: a tool call in the renderer's format (or a fenced block)
    running `cmd` (default: write hello.txt). For the command harness: `cmd` as plain text."""
    from harnessrl.render.messages import ToolCall
    from harnessrl.render.tool_formats import render_calls

    if harness == "command":
        return cmd or "hello"
    cmd = cmd or "echo hello > hello.txt"
    tool_calls = {
        "claude-code": ToolCall("call_1", "Bash", {"command": cmd, "description": "Write hello.txt"}),
        "codex": ToolCall("call_1", "exec_command", {"cmd": cmd}),
        "openclaw": ToolCall("call_1", "exec", {"command": cmd}),
        "qwen-code": ToolCall("call_1", "run_shell_command", {"command": cmd}),
        "opencode": ToolCall("call_1", "bash", {"command": cmd, "description": "Write hello.txt"}),
    }
    if harness in tool_calls:
        return render_calls([tool_calls[harness]], tool_format)
    return f"I will write the file.\n```bash\n{cmd}\n```"


def final_action(harness: str) -> str:
    if harness == "mini-swe-agent":
        return "The file is written.\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"
    return FINAL_ANSWER


def last_user_turn(text: str) -> str:
    """The text after the last ChatML user turn start (SmolLM2's template): where a tool result is."""
    return text.rsplit("<|im_start|>user", 1)[-1]


def since_last_reply(text: str) -> str:
    """The text after the policy's previous reply (the last assistant turn before the generation
    prompt). OpenClaw ends every request with an internal-context user turn, so its tool result is
    not in the last user turn."""
    parts = text.rsplit("<|im_start|>assistant", 2)
    return parts[-2] if len(parts) == 3 else ""


def scripted_policy(harness: str, renderer, cmd: str | None = None):
    """callable(prompt_ids) -> ids: a tool call first, the final answer once a tool result is seen."""
    tok = renderer.tokenizer
    marker = _ANSWERED.get(harness, "<tool_response>")
    first = first_action(harness, renderer.info.tool_format, cmd)
    stop = renderer.stop_ids[0]

    def policy(prompt_ids: list[int]) -> list[int]:
        prompt = tok.decode(prompt_ids)
        answered = marker in (since_last_reply(prompt) if harness == "openclaw" else last_user_turn(prompt))
        text = final_action(harness) if answered else first
        return tok.encode(text, add_special_tokens=False) + [stop]

    return policy


def command_template() -> str:
    """A tiny CLI 'harness' for the command adapter: one chat call via the openai SDK, reply to a file."""
    script = ("import os, openai; c = openai.OpenAI(); "
              "r = c.chat.completions.create(model=os.environ['HARNESSRL_MODEL'], "
              "messages=[{'role': 'user', 'content': os.environ['TASK']}]); "
              "t = r.choices[0].message.content; open('hello.txt', 'w').write(t + '\\n'); print(t)")
    return f'TASK={{task}} python -c "{script}"'


def harness_spec(name: str) -> str:
    return f"command:{command_template()}" if name == "command" else name


def require_installed(name: str) -> None:
    from harnessrl.harness import install

    try:
        install.ensure_installed(name)
    except install.InstallError as e:
        pytest.skip(f"{name} cannot be installed here (no registry?): {e}")


class ProxyRig:
    """A started ProxyServer with a ScriptedEngine following `scripted_policy(harness)`."""

    def __init__(self, harness: str, run_dir: Path, max_model_len: int = 131072,
                 cmd: str | None = None) -> None:
        from harnessrl.engine.model import resolve_model
        from harnessrl.engine.scripted import ScriptedEngine
        from harnessrl.proxy.server import ProxyServer
        from harnessrl.render.renderer import Renderer
        from harnessrl.store import RunStore

        model_dir = resolve_model(None)
        self.renderer = Renderer.from_pretrained(model_dir)
        policy = scripted_policy(harness, self.renderer, cmd)
        self.engine = ScriptedEngine(policy, max_model_len=max_model_len, model_path=str(model_dir))
        self.store = RunStore(run_dir)
        self.server = ProxyServer(self.engine, self.store, self.renderer).start()

    def calls(self, rollout_id: str):
        return sorted(self.store.list_calls([rollout_id]), key=lambda c: c.seq)

    def close(self) -> None:
        self.server.stop()


def prefix_breaks(calls) -> list[int]:
    """Indices k where call k+1's prompt does not start with call k's prompt + sampled ids."""
    bad = []
    for k in range(len(calls) - 1):
        head = list(calls[k].prompt_ids) + list(calls[k].sampled_ids)
        if list(calls[k + 1].prompt_ids[:len(head)]) != head:
            bad.append(k)
    return bad


def save_fixture(path: Path, calls, harness: str, max_bytes: int = 2_000_000) -> None:
    """Write calls as JSONL, one CallRecord per line (raw bodies dropped): CallRecord(**line) loads it."""
    import dataclasses
    import json

    lines = []
    for c in calls:
        rec = dataclasses.asdict(c) | {"request": None, "response": None}
        rec["meta"] = {k: v for k, v in (c.meta or {}).items() if isinstance(v, (str, int, float, bool))}
        rec["meta"]["harness"] = harness
        lines.append(json.dumps(rec, separators=(",", ":")))
    data = "\n".join(lines) + "\n"
    if len(data) > max_bytes:
        raise AssertionError(f"fixture {path} would be {len(data)} bytes (> {max_bytes})")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data)


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "harness_calls"


def update_fixtures() -> bool:
    return os.environ.get("HARNESSRL_UPDATE_FIXTURES") == "1"


def bwrap_for(adapter, workspace_src, port: int, key: str):
    """A bwrap sandbox showing the adapter's read-only paths, its proxy endpoint on `port` with the
    rollout `key` (the test is skipped where bwrap cannot run)."""
    from harnessrl.sandbox import ProxyEndpoint, SandboxConfig, SandboxUnavailable, make_sandbox

    cfg = SandboxConfig(type="bwrap", extra_ro_binds=[str(p) for p in adapter.ro_paths()])
    try:
        return make_sandbox(cfg, workspace_src=workspace_src, proxy=ProxyEndpoint(port, key=key))
    except SandboxUnavailable as e:
        pytest.skip(f"bwrap is not usable here: {e}")


@pytest.fixture(scope="session")
def kit():
    """The helpers above for test modules (conftest is not importable under --import-mode=importlib)."""
    from types import SimpleNamespace

    return SimpleNamespace(TASK=TASK, FINAL_ANSWER=FINAL_ANSWER, ProxyRig=ProxyRig,
                           prefix_breaks=prefix_breaks,
                           save_fixture=save_fixture, FIXTURES=FIXTURES, update_fixtures=update_fixtures,
                           require_installed=require_installed, harness_spec=harness_spec,
                           scripted_policy=scripted_policy, bwrap_for=bwrap_for)
