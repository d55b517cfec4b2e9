"""Codex CLI (npm `@openai/codex`), headless: `codex exec --json <task>` on the Responses API.

A custom model provider in `$CODEX_HOME/config.toml` points at the proxy's `/v1/responses`
(`wire_api = "responses"`; this version refuses "chat"). CODEX_HOME lies in the run's private
dir, outside TMPDIR (codex refuses to put helper binaries under the temp dir). Codex's own
sandbox cannot nest in ours, hence `--dangerously-bypass-approvals-and-sandbox`.

The npm package's `bin/codex.js` is a Node shim that finds the platform package's native binary and
runs it with CODEX_MANAGED_PACKAGE_ROOT and CODEX_MANAGED_BY_NPM set; Node 20 cannot execve, so the shim
stays alive as its parent. The adapter starts that same binary with that same env itself
(`native_launch`), which saves a Node start-up per rollout (~0.1 CPU-s); without the binary it runs the shim.

Profiles (config.toml only): `full` = Codex as shipped; `small` = web search, multi-agent, image,
plugin/app/skill and other optional tools off, apply_patch off, and a short instructions file in
place of the built-in ~17k-character one.
"""

from __future__ import annotations

import json
import os
import platform
from pathlib import Path

from harnessrl.harness import install
from harnessrl.harness.base import (
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
from harnessrl.harness.profiles import Profile, ProfiledInstallAdapter, profile_table

PROVIDER = "harnessrl"
KEY_VAR = "HARNESSRL_API_KEY"


SMALL_INSTRUCTIONS = ("You are a coding agent working in the current directory of a Linux machine. Run shell "
                      "commands with the exec_command tool to do the task, then reply with a short summary.\n")
INSTRUCTIONS_FILE = "@CODEX_HOME@/instructions.md"
SMALL_FEATURES = {f: False for f in (
    "multi_agent", "image_generation", "apps", "plugins", "goals", "tool_suggest", "skill_search", "sleep_tool",
    "browser_use", "computer_use", "in_app_browser", "hooks", "shell_snapshot", "view_image")}
PROFILES = profile_table(
    Profile("full", "Codex as shipped (its tools and instructions)", {"top": {}, "tables": {}, "instructions": None}),
    Profile("small", "only the shell tools, a short instructions file, no web search/apply_patch/multi-agent",
            {"top": {"web_search": "disabled", "include_apply_patch_tool": False,
                     "model_instructions_file": INSTRUCTIONS_FILE},
             "tables": {"features": SMALL_FEATURES, "skills": {"include_instructions": False},
                        "tools.experimental_request_user_input": {"enabled": False},
                        "tools.update_plan": {"enabled": False}},
             "instructions": SMALL_INSTRUCTIONS}),
)


def toml_str(value: str) -> str:
    """A TOML basic string (JSON string escapes are valid TOML escapes)."""
    return json.dumps(value)


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    return toml_str(str(value))


def config_toml(*, model: str, base_url: str, turn_timeout_s: float, top: dict | None = None,
                tables: dict[str, dict] | None = None) -> str:
    """The config: provider + quiet settings, then `top` (root keys) and `tables` (name -> keys)."""
    idle_ms = int(max(turn_timeout_s, 1.0) * 1000)
    extra_tables: list[str] = []
    for name, keys in (tables or {}).items():
        extra_tables += ["", f"[{name}]", *(f"{k} = {toml_value(v)}" for k, v in keys.items())]
    return "\n".join([
        f"model = {toml_str(model)}",
        f"model_provider = {toml_str(PROVIDER)}",
        'approval_policy = "never"',
        'sandbox_mode = "danger-full-access"',
        "check_for_update_on_startup = false",
        *(f"{k} = {toml_value(v)}" for k, v in (top or {}).items()),
        "",
        f"[model_providers.{PROVIDER}]",
        f"name = {toml_str(PROVIDER)}",
        f"base_url = {toml_str(base_url)}",
        f"env_key = {toml_str(KEY_VAR)}",
        'wire_api = "responses"',
        "request_max_retries = 2",
        "stream_max_retries = 2",
        f"stream_idle_timeout_ms = {idle_ms}",
        "",
        "[analytics]",
        "enabled = false",
        "",
        "[feedback]",
        "enabled = false",
        *extra_tables,
        "",
    ])


POLICY_END_MARKS = ("Incomplete response returned", "rejected:")


def policy_ended(text: str) -> bool:
    """Codex failures that the policy caused: a reply cut by the output budget (Codex reports the
    response as incomplete), or a command Codex's own policy rejected (e.g. `rm -rf`)."""
    return any(mark in text for mark in POLICY_END_MARKS)


NATIVE_TARGETS = {"x86_64": ("@openai/codex-linux-x64", "x86_64-unknown-linux-musl"),
                  "aarch64": ("@openai/codex-linux-arm64", "aarch64-unknown-linux-musl")}


def native_launch(shim: Path | None) -> tuple[str, dict[str, str]] | None:
    """The native binary that the npm shim `shim` (node_modules/.bin/codex) would run, and the env
    it would add (bin/codex.js: CODEX_MANAGED_PACKAGE_ROOT, and CODEX_MANAGED_BY_NPM for an npm
    install); None where the shim is missing or the platform package is not installed."""
    target = NATIVE_TARGETS.get(platform.machine())
    if shim is None or target is None or not shim.exists():
        return None
    package_root = Path(os.path.realpath(shim)).parent.parent  # node_modules/@openai/codex
    pkg, triple = target
    exe = package_root.parent.parent / pkg / "vendor" / triple / "bin" / "codex"
    if not exe.is_file() or not os.access(exe, os.X_OK):
        return None
    return str(exe), {"CODEX_MANAGED_PACKAGE_ROOT": str(package_root), "CODEX_MANAGED_BY_NPM": "1"}


class CodexAdapter(ProfiledInstallAdapter):
    name = "codex"
    enforces_max_turns = False  # `codex exec` has no turn limit: the proxy's call budget bounds it
    profiles = PROFILES
    default_profile = "full"

    def build(self, req: RunRequest) -> LaunchSpec:
        codex_home = req.dirs.sub("codex")
        shim = install.bin_path(self.name, self.cache)
        exe, managed = native_launch(shim) or (str(shim), {})
        env = quiet_env(req.dirs) | managed | {
            "CODEX_HOME": codex_home,
            KEY_VAR: req.api_key,
            "RUST_LOG": "error",
        }
        argv = [exe, "exec", "--json", "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox", *self.extra_args]
        if req.workdir:
            argv += ["--cd", req.workdir]
        argv += ["--", req.instruction]
        settings = self.profile.settings
        top = {k: (v.replace("@CODEX_HOME@", codex_home) if isinstance(v, str) else v)
               for k, v in settings["top"].items()}
        config = config_toml(model=req.model, base_url=openai_base(req.proxy_base),
                             turn_timeout_s=req.timeout_s, top=top, tables=settings["tables"])
        files = {f"{codex_home}/config.toml": config}
        if settings["instructions"] is not None:
            files[INSTRUCTIONS_FILE.replace("@CODEX_HOME@", codex_home)] = settings["instructions"]
        return LaunchSpec(argv=argv, env=env, cwd=req.workdir, run_id=req.dirs.run_id,
                          dirs=[*req.dirs.all(), codex_home], files=files)

    def parse(self, req: RunRequest, outcome: LaunchOutcome) -> HarnessResult:
        events = json_lines(outcome.stdout)
        messages = [e["item"].get("text", "") for e in events
                    if e.get("type") == "item.completed" and isinstance(e.get("item"), dict)
                    and e["item"].get("type") in ("agent_message", "assistant_message")]
        turns = sum(1 for e in events if e.get("type") == "turn.completed")
        failed = [e for e in events if e.get("type") == "turn.failed"]
        errors = sum(1 for e in events if e.get("type") == "error")  # includes retried ones
        meta: dict[str, int | str] = {"events": len(events), "turns_completed": turns,
                                      "turns_failed": len(failed), "errors": errors}
        error: str | None = None
        status: HarnessStatus | None = None
        if failed and policy_ended(json.dumps(failed[-1])):
            # the policy's reply was cut by the reply budget, or Codex refused the command the policy
            # wrote: a normal (scored) end of the episode, not a harness failure to drop from training
            meta["end_reason"] = "policy"
            status = "ok"
            error = f"policy ended the episode: {json.dumps(failed[-1])[:300]}"
        elif failed and outcome.status == "ok":
            status = "harness_error"
            error = f"codex reported: {json.dumps(failed[-1])[:300]}"
        elif outcome.status == "harness_error" and policy_ended(outcome.stderr[-4000:]):
            meta["end_reason"] = "policy"
            status = "ok"
            error = f"policy ended the episode: {outcome.stderr[-300:]}"
        return result_from(outcome, final_message=messages[-1] if messages else "", meta=meta,
                           error=error, status=status)
