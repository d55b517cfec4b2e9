"""The builtin reference agent (harness/builtin_agent.py, owned by the TASKS stage), run as its own
process inside the sandbox with this venv's python and the `openai` SDK.

The script is written into the run's private dir by the launcher (no bind mount needed). Its CLI:
`python builtin_agent.py --base-url URL --api-key KEY --model M --max-turns N --task-file PATH`;
env OPENAI_BASE_URL / OPENAI_API_KEY carry the same. The final message is the `final_message` of
the last JSON line it prints, else its last stdout line.
"""

from __future__ import annotations

import sys
from pathlib import Path

from harnessrl.harness.base import (
    HarnessResult,
    LaunchedAdapter,
    LaunchOutcome,
    LaunchSpec,
    RunRequest,
    json_lines,
    last_line,
    openai_base,
    python_ro_paths,
    quiet_env,
    result_from,
)
from harnessrl.harness.profiles import Profile, profile_table, resolve

AGENT_SCRIPT = Path(__file__).with_name("builtin_agent.py")
PROFILES = profile_table(Profile("full", "the reference agent (text mode, one fenced shell block per reply)"))


class BuiltinAdapter(LaunchedAdapter):
    name = "builtin"
    profiles = PROFILES
    default_profile = "full"
    profile: Profile

    def __init__(self, script: Path | None = None, extra_args: tuple[str, ...] = (),
                 profile: str | None = None) -> None:
        self.profile = resolve(self.name, PROFILES, profile, self.default_profile)
        self.script = Path(script) if script else AGENT_SCRIPT
        self.extra_args = tuple(extra_args)

    def ro_paths(self) -> list[Path]:
        return python_ro_paths()

    def preflight(self) -> str | None:
        return None if self.script.is_file() else f"builtin agent script {self.script} is missing"

    def build(self, req: RunRequest) -> LaunchSpec:
        script = req.dirs.sub("builtin_agent.py")
        task = req.dirs.sub("task.md")
        base = openai_base(req.proxy_base)
        argv = [sys.executable, script, "--base-url", base, "--api-key", req.api_key, "--model", req.model,
                "--max-turns", str(req.max_turns), "--task-file", task, *self.extra_args]
        env = quiet_env(req.dirs) | {"OPENAI_BASE_URL": base, "OPENAI_API_KEY": req.api_key,
                                     "HARNESSRL_MODEL": req.model}
        return LaunchSpec(argv=argv, env=env, cwd=req.workdir, run_id=req.dirs.run_id, dirs=req.dirs.all(),
                          files={script: self.script.read_text(), task: req.instruction})

    def parse(self, req: RunRequest, outcome: LaunchOutcome) -> HarnessResult:
        final = next((e for e in reversed(json_lines(outcome.stdout)) if "final_message" in e), None)
        if final is None:
            return result_from(outcome, final_message=last_line(outcome.stdout))
        meta = {k: v for k, v in final.items() if k != "final_message" and isinstance(v, (int, float, str))}
        return result_from(outcome, final_message=str(final.get("final_message") or ""), meta=meta)
