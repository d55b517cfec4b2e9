"""opencode (npm `opencode-ai`), headless: `opencode run -m harnessrl/<model> <task>`.

The proxy is an OpenAI-compatible provider `harnessrl` given in `OPENCODE_CONFIG_CONTENT` (its
Chat Completions route, the rollout's key); opencode's data, config and cache dirs are the run's
private XDG dirs. It has no turn limit of its own, so the proxy's call budget bounds it
(`enforces_max_turns = False`); its title generator is one call of that budget (a side call:
a prompt with no tools that no later call continues). The final message is its stdout.

Profiles (config only): `full` = as shipped (its default tools and agent prompt); `small` = every
tool but `bash` off and a one-line prompt for its `build` agent.
"""

from __future__ import annotations

import json
from typing import Any

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

PROVIDER = "harnessrl"
OFF_TOOLS = ("edit", "glob", "grep", "list", "patch", "read", "skill", "task", "todoread", "todowrite",
             "webfetch", "websearch", "write")
SMALL_PROMPT = ("You are a coding agent working in the current directory of a Linux machine: "
                "run shell commands with the bash tool, then reply with a short summary.")
QUIET = {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
         "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1"}

PROFILES = profile_table(
    Profile("full", "opencode as shipped: its default tools and agent prompt", {"config": {}}),
    Profile("small", "only the bash tool, a one-line build-agent prompt",
            {"config": {"tools": {t: False for t in OFF_TOOLS}, "agent": {"build": {"prompt": SMALL_PROMPT}}}}),
)


def opencode_config(base_url: str, api_key: str, model: str, extra: dict[str, Any]) -> dict[str, Any]:
    """The config opencode runs with: the proxy as its only provider and model."""
    return {"$schema": "https://opencode.ai/config.json", "autoupdate": False, "share": "disabled",
            "provider": {PROVIDER: {"npm": "@ai-sdk/openai-compatible", "name": PROVIDER,
                                    "options": {"baseURL": base_url, "apiKey": api_key},
                                    "models": {model: {"name": model}}}},
            "model": f"{PROVIDER}/{model}", "small_model": f"{PROVIDER}/{model}", **extra}


class OpencodeAdapter(ProfiledInstallAdapter):
    name = "opencode"
    profiles = PROFILES
    default_profile = "full"
    enforces_max_turns = False  # `opencode run` has no turn limit: the proxy's call budget bounds it

    def build(self, req: RunRequest) -> LaunchSpec:
        exe = install.bin_path(self.name, self.cache)
        config = opencode_config(openai_base(req.proxy_base), req.api_key, req.model, self.profile.settings["config"])
        env = quiet_env(req.dirs) | QUIET | {"OPENCODE_CONFIG_CONTENT": json.dumps(config)}
        if req.workdir:  # opencode resolves its project dir from PWD, which the sandbox does not reset
            env["PWD"] = req.workdir
        argv = [str(exe), "run", "-m", f"{PROVIDER}/{req.model}", *self.extra_args, req.instruction]
        return LaunchSpec(argv=argv, env=env, cwd=req.workdir, run_id=req.dirs.run_id, dirs=req.dirs.all())

    def parse(self, req: RunRequest, outcome: LaunchOutcome) -> HarnessResult:
        return result_from(outcome, final_message=outcome.stdout.strip())
