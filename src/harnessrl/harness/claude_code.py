"""Claude Code (npm `@anthropic-ai/claude-code`), headless: `claude -p <task> --output-format stream-json`.

Points it at the proxy's Anthropic Messages route with ANTHROPIC_BASE_URL; the quiet env (no
telemetry, no non-essential traffic, no auto-updater) makes headless mode talk only to the proxy.
`IS_SANDBOX=1` lets `--dangerously-skip-permissions` run as uid 0.

Profiles (flags only): `full` = as shipped (12 tools, ~12.4k-token first prompt); `small` =
`--tools Bash` (Claude Code's own system prompt, one tool); `tiny` = `--tools Bash --bare
--system-prompt <one line>` (no hooks/CLAUDE.md discovery, a one-line system prompt).
"""

from __future__ import annotations

from typing import Any

from harnessrl.harness import install
from harnessrl.harness.profiles import Profile, ProfiledInstallAdapter, profile_table
from harnessrl.harness.base import (
    HarnessResult,
    LaunchOutcome,
    LaunchSpec,
    RunRequest,
    anthropic_base,
    json_lines,
    quiet_env,
    result_from,
)

QUIET = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_BUG_COMMAND": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
    "IS_SANDBOX": "1",
    # no `x-anthropic-billing-header: cc_version=...<hash of the task>` first line in the system prompt:
    # billing metadata for Anthropic's API, not an instruction. With it, two tasks' prompts differ from
    # token ~25 on, so the engine's prefix cache serves nothing of a task's first call; without it every
    # rollout shares the system prompt and the worked examples (36 fewer tokens a call, too)
    "CLAUDE_CODE_ATTRIBUTION_HEADER": "0",
}


TINY_SYSTEM_PROMPT = ("You are a coding agent working in the current directory of a Linux machine: "
                      "run shell commands with the Bash tool, then reply with a short summary.")

PROFILES = profile_table(
    Profile("full", "Claude Code as shipped: its default tools and system prompt", {"args": []}),
    Profile("small", "only the Bash tool, Claude Code's own system prompt", {"args": ["--tools", "Bash"]}),
    Profile("tiny", "only the Bash tool, --bare, a one-line system prompt",
            {"args": ["--tools", "Bash", "--bare", "--system-prompt", TINY_SYSTEM_PROMPT]}),
)


def policy_ended(subtype: Any, message: str) -> bool:
    """Claude Code's error results that the policy caused: the turn limit, or a reply cut by the
    output-token budget (Claude Code retries a cut reply, then gives up with this message)."""
    return subtype == "error_max_turns" or "output token maximum" in message


class ClaudeCodeAdapter(ProfiledInstallAdapter):
    name = "claude-code"
    profiles = PROFILES
    default_profile = "full"

    def build(self, req: RunRequest) -> LaunchSpec:
        exe = install.bin_path(self.name, self.cache)
        env = quiet_env(req.dirs) | QUIET | {
            "ANTHROPIC_BASE_URL": anthropic_base(req.proxy_base),
            "ANTHROPIC_API_KEY": req.api_key,
            "ANTHROPIC_MODEL": req.model,
            "ANTHROPIC_SMALL_FAST_MODEL": req.model,
            "ANTHROPIC_DEFAULT_HAIKU_MODEL": req.model,
            "ANTHROPIC_DEFAULT_SONNET_MODEL": req.model,
            "ANTHROPIC_DEFAULT_OPUS_MODEL": req.model,
            "CLAUDE_CONFIG_DIR": f"{req.dirs.home}/.claude",
            # bound one model call (the proxy may queue behind a busy engine)
            "API_TIMEOUT_MS": str(int(max(req.timeout_s, 1.0) * 1000)),
        }
        # the task text goes last, after "--": an instruction that starts with "-" is the prompt, not an option
        argv = [str(exe), "-p", "--output-format", "stream-json", "--verbose",
                "--dangerously-skip-permissions", "--model", req.model, "--max-turns", str(req.max_turns),
                *self.profile.settings["args"], *self.extra_args, "--", req.instruction]
        return LaunchSpec(argv=argv, env=env, cwd=req.workdir, run_id=req.dirs.run_id,
                          dirs=[*req.dirs.all(), f"{req.dirs.home}/.claude"])

    def parse(self, req: RunRequest, outcome: LaunchOutcome) -> HarnessResult:
        events = json_lines(outcome.stdout)
        final = next((e for e in reversed(events) if e.get("type") == "result"), None)
        meta: dict[str, object] = {"events": len(events)}  # then fields of the harness's own JSON
        if final is None:
            return result_from(outcome, final_message="", meta=meta)
        meta.update({k: final.get(k) for k in ("subtype", "num_turns", "stop_reason", "is_error")})
        message = final.get("result") if isinstance(final.get("result"), str) else ""
        if final.get("is_error") and policy_ended(final.get("subtype"), message or ""):
            # the policy ran out of turns or rambled past the reply budget: a normal end of the episode
            # (the verifier scores the workspace), not a harness failure to drop from training
            meta["end_reason"] = "max_turns" if final.get("subtype") == "error_max_turns" else "max_output_tokens"
            return result_from(outcome, final_message="", meta=meta, status="ok",
                               error=f"policy ended the episode ({final.get('subtype')}): {(message or '')[:200]}")
        if final.get("is_error"):  # e.g. the API rejected the prompt (too long), or an engine error
            error = f"claude reported an error ({final.get('subtype')}): {(message or '')[:300]}"
            if outcome.error:
                error = f"{outcome.error}; {error}"
            return result_from(outcome, final_message="", meta=meta, error=error)
        return result_from(outcome, final_message=message or "", meta=meta)
