"""mini-swe-agent (PyPI `mini-swe-agent`, this venv's `mini`), via litellm's OpenAI client.

Two action formats (harness/action_format.py): "bash" (default; `--model-class litellm_textbased`
with harnessrl's short config `mini_text.yaml`: one fenced shell block per reply, which a small model
can hit) and "tools" (mini's default `mini.yaml`: a native `bash` tool call; "tool" is accepted). Cost tracking is switched off (it
crashes on unknown models) and the global config dir is private.

Profiles: `bash` (default; aliases `small`, `text`), `tool` (aliases `tools`, `full`: mini-swe-agent as shipped) and
`tool-small` (the native `bash` tool with harnessrl's short prompts, `mini_tool.yaml`: mini.yaml puts
~1k tokens of workflow guide after the task, which a 135M model copies instead of doing the task).
"""

from __future__ import annotations

import json
from pathlib import Path

from harnessrl.harness import install
from harnessrl.harness.action_format import ActionFormat, action_format
from harnessrl.harness.base import (
    HarnessConfigError,
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
from harnessrl.harness.profiles import Profile, profile_table, resolve

TEXT_CONFIG = Path(__file__).with_name("mini_text.yaml")
PROFILES = profile_table(
    Profile("bash", "bash format: litellm_textbased + harnessrl's short mini_text.yaml (one fenced block per reply)",
            {"format": "bash"}, aliases=("small", "text")),
    Profile("tool", "mini-swe-agent as shipped: mini.yaml, one native `bash` tool", {"format": "tools"},
            aliases=("tools", "full")),
    Profile("tool-small", "the native `bash` tool with harnessrl's short prompts (mini_tool.yaml)",
            {"format": "tools", "config": "mini_tool.yaml"}),
)


class MiniSweAgentAdapter(LaunchedAdapter):
    name = "mini-swe-agent"
    profiles = PROFILES
    default_profile = "bash"
    profile: Profile

    def __init__(self, format: str | None = None, config: Path | None = None, command_timeout_s: int = 60,
                 max_tokens: int | None = None, temperature: float | None = None, profile: str | None = None,
                 mode: str | None = None) -> None:
        """`format`: the action format (bash | tools), which picks the profile of that name when no
        profile is given; `mode` is its older name."""
        if format is not None and mode is not None:
            raise HarnessConfigError("mini-swe-agent takes format (or its older name mode), not both")
        given = format if format is not None else mode
        if given is not None:
            fmt = action_format(given, self.name)
            profile = profile if profile is not None else fmt
        self.profile = resolve(self.name, PROFILES, profile, self.default_profile)
        self.format: ActionFormat = self.profile.settings["format"]
        self.config = Path(config) if config else None
        self.command_timeout_s = command_timeout_s
        self.max_tokens = max_tokens  # per model call (mini sends none by default)
        self.temperature = temperature

    def ro_paths(self) -> list[Path]:
        return python_ro_paths()

    def _config_text(self) -> str | None:
        if self.config is not None:
            return self.config.read_text()
        if self.profile.settings.get("config"):
            return Path(__file__).with_name(self.profile.settings["config"]).read_text()
        return TEXT_CONFIG.read_text() if self.format == "bash" else None

    def preflight(self) -> str | None:
        return not_installed(self.name)

    def build(self, req: RunRequest) -> LaunchSpec:
        exe = install.bin_path(self.name)
        cfg_dir = req.dirs.sub("mswea")
        traj = req.dirs.sub("trajectory.json")
        files: dict[str, str] = {}
        text = self._config_text()
        if text is not None:
            files[f"{cfg_dir}/config.yaml"] = text
        config_ref = f"{cfg_dir}/config.yaml" if text is not None else "mini.yaml"
        argv = [str(exe), "-y", "-l", "0", "--exit-immediately", "-m", f"openai/{req.model}",
                "-c", config_ref,
                "-c", f"model.model_kwargs.api_base={openai_base(req.proxy_base)}",
                "-c", f"model.model_kwargs.timeout={int(max(req.timeout_s, 1))}",
                "-c", f"agent.step_limit={req.max_turns}",
                "-c", f"agent.wall_time_limit_seconds={int(max(req.timeout_s, 1))}",
                "-c", f"environment.timeout={self.command_timeout_s}"]
        if req.workdir:
            argv += ["-c", f"environment.cwd={req.workdir}"]
        if self.max_tokens is not None:
            argv += ["-c", f"model.model_kwargs.max_tokens={int(self.max_tokens)}"]
        if self.temperature is not None:
            argv += ["-c", f"model.model_kwargs.temperature={float(self.temperature)}"]
        if self.format == "bash":
            argv += ["--model-class", "litellm_textbased"]
        argv += ["-t", req.instruction, "-o", traj]
        env = quiet_env(req.dirs) | {
            "OPENAI_API_KEY": req.api_key,
            "MSWEA_CONFIGURED": "true",
            "MSWEA_COST_TRACKING": "ignore_errors",
            "MSWEA_GLOBAL_CONFIG_DIR": cfg_dir,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "LITELLM_TELEMETRY": "False",
        }
        return LaunchSpec(argv=argv, env=env, cwd=req.workdir, run_id=req.dirs.run_id,
                          dirs=[*req.dirs.all(), cfg_dir], files=files, collect=[traj])

    def parse(self, req: RunRequest, outcome: LaunchOutcome) -> HarnessResult:
        raw = outcome.files.get(req.dirs.sub("trajectory.json"))
        info: dict = {}
        if raw:
            try:
                info = json.loads(raw).get("info", {}) or {}
            except ValueError:
                info = {}
        meta = {k: info.get(k) for k in ("exit_status",) if k in info}
        if isinstance(info.get("model_stats"), dict):
            meta["api_calls"] = info["model_stats"].get("api_calls")
        return result_from(outcome, final_message=str(info.get("submission") or ""), meta=meta)
