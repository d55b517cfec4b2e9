"""Any CLI agent: `command:<template>`, run with `sh -c` inside the sandbox.

The template may use `{task}` and `{workspace}`; both are substituted shell-quoted (write
`mycli --prompt {task}`, not `'{task}'`). Other braces are left alone. The proxy URLs are in the
variables such CLIs read: OPENAI_BASE_URL (…/v1), OPENAI_API_KEY, ANTHROPIC_BASE_URL,
ANTHROPIC_API_KEY, plus HARNESSRL_MODEL and HARNESSRL_MAX_TURNS. The final message is the last
stdout line.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from harnessrl.harness.base import (
    HarnessConfigError,
    LaunchedAdapter,
    LaunchSpec,
    RunRequest,
    anthropic_base,
    openai_base,
    python_ro_paths,
    quiet_env,
)

PLACEHOLDERS = ("{task}", "{workspace}")


def render_template(template: str, *, task: str, workspace: str) -> str:
    """Substitute {task} and {workspace} (shell-quoted) and nothing else."""
    out, i = [], 0
    while i < len(template):
        for ph, value in (("{task}", task), ("{workspace}", workspace)):
            if template.startswith(ph, i):
                out.append(shlex.quote(value))
                i += len(ph)
                break
        else:
            out.append(template[i])
            i += 1
    return "".join(out)


class CommandAdapter(LaunchedAdapter):
    name = "command"

    def __init__(self, template: str, shell: str = "/bin/sh", ro: tuple[Path, ...] = ()) -> None:
        if not template.strip():
            raise HarnessConfigError("command harness needs a template: --harness 'command:<cli> {task}'")
        self.template = template
        self.shell = shell
        self.ro = tuple(Path(p) for p in ro)

    def ro_paths(self) -> list[Path]:
        return [*self.ro, *python_ro_paths()]

    def build(self, req: RunRequest) -> LaunchSpec:
        workspace = req.workdir or "."
        line = render_template(self.template, task=req.instruction, workspace=workspace)
        env = quiet_env(req.dirs) | {
            "OPENAI_BASE_URL": openai_base(req.proxy_base),
            "OPENAI_API_KEY": req.api_key,
            "ANTHROPIC_BASE_URL": anthropic_base(req.proxy_base),
            "ANTHROPIC_API_KEY": req.api_key,
            "HARNESSRL_MODEL": req.model,
            "HARNESSRL_MAX_TURNS": str(req.max_turns),
        }
        return LaunchSpec(argv=[self.shell, "-c", line], env=env, cwd=req.workdir, run_id=req.dirs.run_id,
                          dirs=req.dirs.all())
