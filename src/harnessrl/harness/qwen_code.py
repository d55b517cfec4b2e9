"""Qwen Code (npm `@qwen-code/qwen-code`), headless: `qwen --auth-type openai ... -o text <task>`.

Points it at the proxy's Chat Completions route with `--openai-base-url` / `--openai-api-key` and
`-m <served model>`; `--yolo` approves every tool; `--max-session-turns N` is its own turn limit,
and it exits 53 when it hits it: that is the policy's end (status ok, `end_reason = "max_turns"`),
scored by the verifier like Claude Code's max-turns stop. The final message is its stdout.

Profiles (flags only): `full` = as shipped (its default tools and system prompt); `small` =
`--bare` (no startup auto-discovery: QWEN.md, extensions, memory), `run_shell_command` and the
edit tools (the others `--exclude-tools`: excluding `edit` would also deny shell commands that
write files) and a one-line `--system-prompt`.
"""

from __future__ import annotations

from harnessrl.harness import install
from harnessrl.harness.base import (
    HarnessResult,
    LaunchOutcome,
    LaunchSpec,
    RunRequest,
    openai_base,
    quiet_env,
    result_from,
)
from harnessrl.harness.profiles import Profile, ProfiledInstallAdapter, profile_table

TURN_LIMIT_EXIT = 53  # qwen's exit code at --max-session-turns
SMALL_SYSTEM_PROMPT = ("You are a coding agent working in the current directory of a Linux machine: "
                       "run shell commands with the run_shell_command tool, then reply with a short summary.")
QUIET = {"QWEN_TELEMETRY_ENABLED": "false", "QWEN_CODE_DISABLE_UPDATE_CHECK": "1", "GEMINI_TELEMETRY_ENABLED": "false"}

# the tools of 0.24.4 that small drops (`--core-tools` does not narrow the list; `--exclude-tools` does).
# `edit` and `write_file` stay: excluding them is also a deny rule on shell commands that write files
OTHER_TOOLS = ("read_file", "read_many_files", "notebook_edit", "get_goal", "update_goal", "glob", "grep_search",
               "list_directory", "web_fetch", "web_search", "todo_write", "save_memory", "task", "skill",
               "exit_plan_mode")

PROFILES = profile_table(
    Profile("full", "Qwen Code as shipped: its default tools and system prompt", {"args": []}),
    Profile("small", "--bare, run_shell_command and the edit tools only, a one-line system prompt",
            {"args": ["--bare", *(f"--exclude-tools={t}" for t in OTHER_TOOLS), "--system-prompt", SMALL_SYSTEM_PROMPT]}),
)


class QwenCodeAdapter(ProfiledInstallAdapter):
    name = "qwen-code"
    profiles = PROFILES
    default_profile = "full"

    def build(self, req: RunRequest) -> LaunchSpec:
        exe = install.bin_path(self.name, self.cache)
        env = quiet_env(req.dirs) | QUIET | {"OPENAI_BASE_URL": openai_base(req.proxy_base),
                                             "OPENAI_API_KEY": req.api_key, "OPENAI_MODEL": req.model}
        if req.workdir:  # the sandbox does not reset PWD for a harness it starts directly
            env["PWD"] = req.workdir
        argv = [str(exe), "--auth-type", "openai", "--openai-base-url", openai_base(req.proxy_base),
                "--openai-api-key", req.api_key, "-m", req.model, "--yolo",
                "--max-session-turns", str(req.max_turns), "-o", "text",
                *self.profile.settings["args"], *self.extra_args, req.instruction]
        return LaunchSpec(argv=argv, env=env, cwd=req.workdir, run_id=req.dirs.run_id,
                          dirs=[*req.dirs.all(), f"{req.dirs.home}/.qwen"])

    def parse(self, req: RunRequest, outcome: LaunchOutcome) -> HarnessResult:
        message = outcome.stdout.strip()
        if outcome.status == "harness_error" and outcome.exit_code == TURN_LIMIT_EXIT:
            return result_from(outcome, message, meta={"end_reason": "max_turns"}, status="ok",
                               error=f"policy ended the episode (qwen's --max-session-turns {req.max_turns})")
        return result_from(outcome, final_message=message)
