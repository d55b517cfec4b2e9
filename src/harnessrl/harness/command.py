"""Any CLI agent: `command[<options>]:<template>`, run by a shell inside the sandbox.

The template may use `{task}` and `{workspace}`; both are substituted shell-quoted (write
`mycli --prompt {task}`, not `'{task}'`). Other braces are left alone. The proxy URLs are in the
variables such CLIs read: OPENAI_BASE_URL (…/v1), OPENAI_API_KEY, ANTHROPIC_BASE_URL,
ANTHROPIC_API_KEY, GOOGLE_GEMINI_BASE_URL, GEMINI_API_KEY, GOOGLE_API_KEY, plus HARNESSRL_MODEL,
HARNESSRL_MAX_TURNS and HARNESSRL_PROXY (the base without a protocol suffix).

Options (`CommandOptions`), given in the spec (`command[ro=/opt/qwen,end_exits=53,name=qwen]:...`,
comma-separated `key=value`, a list key repeated per item) or as the run config's
`harnesses[].options` (YAML lists), the two merged:

    ro         host paths shown read-only in the sandbox (the CLI's install dir, its runtime)
    rw         dirs of the run's private HOME the harness may write (`DIR`, created empty), or
               `HOSTDIR:DIR` (seeded with a copy of HOSTDIR's files: a prepared config the harness
               may change without touching the host)
    end_exits  exit codes that mean "the agent ended" (its own turn limit): the rollout is then
               `ok` and scored by the verifier, as for exit 0
    final      where the final message is: `last_line` of stdout (default), all of `stdout`, or
               `file:PATH` (a file the harness writes; relative paths are in the workspace)
    shell      the shell that runs the template (default /bin/sh)
    shell_tool the CLI's shell tool when the renderer's detector misses it: `NAME:ARG:KIND` (YAML:
               `{name, arg, kind}`), KIND = string | argv | list (a list of whole command strings);
               the bash tool formats then drive that tool (render/bash_format.py)
    name       the harness's name in rollout ids (spec only; default `cmd-<program>-<6 hex>`,
               rollout/plan.py `harness_tag`)

Every path is checked by `check()` (`harnessrl rollout/eval` call it through
`harness.check_harnesses` before the engine starts; `preflight` before each run): a missing binary
or path is a HarnessConfigError naming it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from harnessrl.harness.base import (
    HarnessConfigError,
    HarnessResult,
    LaunchedAdapter,
    LaunchOutcome,
    LaunchSpec,
    RunRequest,
    anthropic_base,
    last_line,
    openai_base,
    python_ro_paths,
    quiet_env,
    result_from,
)
from harnessrl.render.bash_format import ShellOverride, ShellOverrideError, parse_shell_override

PLACEHOLDERS = ("{task}", "{workspace}")
LIST_KEYS = ("ro", "rw", "end_exits")
SEED_LIMIT_BYTES = 4 << 20  # the files copied into the sandbox by `rw: HOSTDIR:DIR`, in all
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
# where the sandbox finds binaries besides the `ro` paths (bwrap: /usr and the venv)
_SANDBOX_BIN_ROOTS = ("/usr", "/bin", "/sbin")
NOT_FOUND_EXIT = 127  # the shell's "command not found"
# the fix for a command: harness that cannot start (harness.start_hint says it too)
SHOW_IT_FIX = ("show the CLI's install dir and runtime to the sandbox with ro (command[ro=DIR]:...) and try it "
               "with `harnessrl harness check SPEC`")
NOT_FOUND_HINT = ("Exit 127 is the shell's 'command not found': the sandbox shows only /usr, this venv and "
                  f"the ro paths, so {SHOW_IT_FIX}; `harnessrl harness install` is for shipped harnesses only")
_SHELL_BUILTINS = frozenset({"cd", "export", "set", "unset", "true", "false", ":", ".", "source", "eval", "exit",
                             "test", "[", "if", "for", "while", "case", "umask", "ulimit", "trap", "wait"})


@dataclass(frozen=True)
class CommandOptions:
    """The validated options of one `command:` harness (see the module docstring)."""

    ro: tuple[str, ...] = ()
    rw: tuple[str, ...] = ()
    end_exits: tuple[int, ...] = ()
    final: str = "last_line"
    shell: str = "/bin/sh"
    name: str = ""
    shell_tool: ShellOverride | None = None

    @classmethod
    def keys(cls) -> list[str]:
        return [f.name for f in fields(cls)]


def split_command_spec(spec: str) -> tuple[dict[str, Any], str]:
    """`command[k=v,...]:<template>` -> (options, template); `command:<template>` -> ({}, template)."""
    rest = spec.strip()[len("command"):]
    options: dict[str, Any] = {}
    if rest.startswith("["):
        end = rest.find("]")
        if end < 0:
            raise HarnessConfigError(f"command spec {spec[:80]!r}: '[' without ']' (write command[key=value,...]:<template>)")
        for item in filter(None, (s.strip() for s in rest[1:end].split(","))):
            key, eq, value = item.partition("=")
            if not eq:
                raise HarnessConfigError(f"command option {item!r} needs a value: write key=value")
            key = key.strip()
            if key in LIST_KEYS:
                options.setdefault(key, []).append(value.strip())
            else:
                options[key] = value.strip()
        rest = rest[end + 1:]
    if not rest.startswith(":"):
        raise HarnessConfigError("command harness needs a template: --harness 'command:<cli> {task}'")
    return options, rest[1:]


def merge_options(spec_options: dict[str, Any], config_options: dict[str, Any]) -> dict[str, Any]:
    """Spec options over config options; list options are joined."""
    merged = dict(config_options)
    for key, value in spec_options.items():
        merged[key] = [*_as_list(merged.get(key)), *value] if key in LIST_KEYS else value
    return merged


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return list(value) if isinstance(value, (list, tuple)) else [value]


def parse_options(raw: dict[str, Any]) -> CommandOptions:
    """Raw options (spec or YAML) -> CommandOptions; an unknown key or a bad value is a
    HarnessConfigError that names the valid keys or the value's form."""
    unknown = sorted(set(raw) - set(CommandOptions.keys()))
    if unknown:
        raise HarnessConfigError(f"unknown command harness option {unknown[0]!r}; valid: {', '.join(CommandOptions.keys())}")
    try:
        exits = tuple(int(x) for x in _as_list(raw.get("end_exits")))
    except (TypeError, ValueError):
        raise HarnessConfigError(f"end_exits must be exit codes (integers), got {raw.get('end_exits')!r}") from None
    if any(not 1 <= x <= 255 or x == 124 for x in exits):
        raise HarnessConfigError(f"end_exits must be in 1..255 and not 124 (the time limit's code), got {list(exits)}")
    final = str(raw.get("final", "last_line"))
    if final not in ("last_line", "stdout") and not (final.startswith("file:") and len(final) > 5):
        raise HarnessConfigError(f"final must be last_line, stdout or file:PATH, got {final!r}")
    name = str(raw.get("name", ""))
    if name and not _NAME.match(name):
        raise HarnessConfigError(f"name {name!r} must be 1-40 letters, digits, '_', '.' or '-' (it goes in rollout ids)")
    try:
        shell_tool = None if raw.get("shell_tool") in (None, "") else parse_shell_override(raw["shell_tool"])
    except ShellOverrideError as e:
        raise HarnessConfigError(str(e)) from None
    return CommandOptions(ro=tuple(str(p) for p in _as_list(raw.get("ro"))),
                          rw=tuple(str(p) for p in _as_list(raw.get("rw"))), end_exits=exits, final=final,
                          shell=str(raw.get("shell", "/bin/sh")), name=name, shell_tool=shell_tool)


def shell_tool_overrides(specs: list[str], options: dict[str, dict[str, Any]]) -> tuple[ShellOverride, ...]:
    """The shell tools the `command:` harnesses among `specs` name (`shell_tool`), for the renderer
    that serves them (`options`: spec -> run-config options). Other harnesses name none."""
    out: list[ShellOverride] = []
    for spec in specs:
        if not spec.strip().startswith(("command:", "command[")):
            continue
        spec_options, _ = split_command_spec(spec)
        found = parse_options(merge_options(spec_options, dict(options.get(spec) or {}))).shell_tool
        if found is not None and found not in out:
            out.append(found)
    return tuple(out)


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


def _rw_parts(entry: str) -> tuple[str | None, str]:
    host, sep, inner = entry.partition(":")
    return (host, inner) if sep else (None, host)


def _check_rw_dir(inner: str) -> None:
    p = Path(inner)
    if p.is_absolute() or ".." in p.parts or not inner.strip():
        raise HarnessConfigError(f"rw dir {inner!r} must be a relative path inside the run's HOME (e.g. .qwen)")


def seed_files(host_dir: Path, inner: str, home: str) -> dict[str, str]:
    """The text files under `host_dir` as LaunchSpec files under `<home>/<inner>` (bounded)."""
    out: dict[str, str] = {}
    total = 0
    for path in sorted(p for p in host_dir.rglob("*") if p.is_file()):
        data = path.read_bytes()
        total += len(data)
        if total > SEED_LIMIT_BYTES:
            raise HarnessConfigError(f"rw seed {host_dir} holds more than {SEED_LIMIT_BYTES >> 20} MiB; "
                                     "bind big trees read-only with ro instead")
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise HarnessConfigError(f"rw seed {path} is not a text file; bind binaries read-only with ro") from None
        out[f"{home}/{inner}/{path.relative_to(host_dir).as_posix()}"] = text
    return out


class CommandAdapter(LaunchedAdapter):
    name = "command"
    # a command harness may have no turn limit of its own: the proxy's call budget bounds it
    enforces_max_turns = False

    def __init__(self, template: str, **options: Any) -> None:
        if not template.strip():
            raise HarnessConfigError("command harness needs a template: --harness 'command:<cli> {task}'")
        self.template = template
        self.options = parse_options(options)
        self.shell = self.options.shell
        self.ro = tuple(Path(p) for p in self.options.ro)

    def preflight(self) -> str | None:
        try:
            self.check()
        except HarnessConfigError as e:
            return str(e)
        return None

    def check(self) -> None:
        """Every path the run needs exists on the host: the ro paths, rw seeds, the shell and the
        template's binary (an absolute path, or a name on the sandbox's PATH or under an ro path)."""
        for p in self.ro:
            if not p.is_absolute():
                raise HarnessConfigError(f"ro path {str(p)!r} must be absolute")
            if not p.exists():
                raise HarnessConfigError(f"ro path {p} does not exist on this host")
        for entry in self.options.rw:
            host, inner = _rw_parts(entry)
            _check_rw_dir(inner)
            if host is not None and not Path(host).is_dir():
                raise HarnessConfigError(f"rw seed dir {host} does not exist on this host")
        if not Path(self.shell).is_file():
            raise HarnessConfigError(f"shell {self.shell} does not exist on this host")
        binary = self.binary()
        if "/" in binary and not Path(binary).exists():
            raise HarnessConfigError(f"the command's binary {binary} does not exist on this host")
        if binary and self.find_binary(binary) is None:
            where = ", ".join(str(p) for p in self.ro) or "none given"
            raise HarnessConfigError(
                f"the command's binary {binary!r} is not visible in the sandbox: it must be on the sandbox's "
                f"PATH (/usr/bin, /bin, this venv's bin) or under a read-only path (ro: {where}); "
                f"add its install dir with ro, e.g. --harness 'command[ro=/opt/mycli]:/opt/mycli/bin/mycli {{task}}'")

    def binary(self) -> str:
        """The template's program: its first word after any VAR=value assignments ("" if unclear)."""
        try:
            words = shlex.split(self.template)
        except ValueError:
            return ""
        for word in words:
            if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", word) or word in ("exec", "env", "command"):
                continue
            if word in _SHELL_BUILTINS or word.startswith("{") or any(c in word for c in "$`|;&<>()"):
                return ""
            return word
        return ""

    def find_binary(self, binary: str) -> Path | None:
        import sys

        visible = [*self.ro, *map(Path, _SANDBOX_BIN_ROOTS), Path(sys.prefix), Path(sys.base_prefix)]
        if "/" in binary:
            path = Path(binary)
            real = Path(os.path.realpath(path))
            ok = path.is_file() and os.access(path, os.X_OK)
            return path if ok and any(real.is_relative_to(os.path.realpath(v)) or path.is_relative_to(v)
                                      for v in visible) else None
        search = [str(Path(sys.prefix) / "bin"), "/usr/local/bin", "/usr/bin", "/bin"]
        search += [str(p / "bin") for p in self.ro] + [str(p) for p in self.ro]
        found = shutil.which(binary, path=os.pathsep.join(search))
        return Path(found) if found else None

    def ro_paths(self) -> list[Path]:
        seeds = [Path(h) for h, _ in map(_rw_parts, self.options.rw) if h is not None]
        return [*self.ro, *seeds, *python_ro_paths()]

    def build(self, req: RunRequest) -> LaunchSpec:
        workspace = req.workdir or "."
        line = render_template(self.template, task=req.instruction, workspace=workspace)
        env = quiet_env(req.dirs) | {
            "OPENAI_BASE_URL": openai_base(req.proxy_base),
            "OPENAI_API_KEY": req.api_key,
            "ANTHROPIC_BASE_URL": anthropic_base(req.proxy_base),
            "ANTHROPIC_API_KEY": req.api_key,
            "GOOGLE_GEMINI_BASE_URL": anthropic_base(req.proxy_base),
            "GEMINI_API_KEY": req.api_key,
            "GOOGLE_API_KEY": req.api_key,
            "HARNESSRL_PROXY": anthropic_base(req.proxy_base),
            "HARNESSRL_MODEL": req.model,
            "HARNESSRL_MAX_TURNS": str(req.max_turns),
        }
        dirs, files = list(req.dirs.all()), {}
        for entry in self.options.rw:
            host, inner = _rw_parts(entry)
            dirs.append(f"{req.dirs.home}/{inner}")
            if host is not None:
                files.update(seed_files(Path(host), inner, req.dirs.home))
        collect = [self._final_file(workspace)] if self.options.final.startswith("file:") else []
        return LaunchSpec(argv=[self.shell, "-c", line], env=env, cwd=req.workdir, run_id=req.dirs.run_id,
                          dirs=dirs, files=files, collect=collect)

    def _final_file(self, workspace: str) -> str:
        path = self.options.final[len("file:"):]
        return path if path.startswith("/") else f"{workspace.rstrip('/')}/{path}"

    def parse(self, req: RunRequest, outcome: LaunchOutcome) -> HarnessResult:
        final = self.options.final
        if final == "stdout":
            message = outcome.stdout.strip()
        elif final.startswith("file:"):
            message = (outcome.files.get(self._final_file(req.workdir or ".")) or "").strip()
        else:
            message = last_line(outcome.stdout)
        if outcome.status == "harness_error" and outcome.exit_code in self.options.end_exits:
            return result_from(outcome, message, meta={"end_reason": f"exit {outcome.exit_code}"}, error="",
                               status="ok")
        if outcome.status == "harness_error" and outcome.exit_code == NOT_FOUND_EXIT:
            return result_from(outcome, message, error=f"{outcome.error}. {NOT_FOUND_HINT}")
        return result_from(outcome, final_message=message)
