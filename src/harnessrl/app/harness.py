"""Commands of the harness stage (registered by harnessrl.app.main). Keep top-level imports light.

  harnessrl harness install NAME... [--force]   pinned versions into $HARNESSRL_CACHE/harnesses/<name>
  harnessrl harness list [--json]               installed? version, path, size
  harnessrl harness check SPEC [--sandbox local] [--json]   one scripted rollout: what the harness sent
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Optional

import typer

from harnessrl.app.cli_style import CliApp


def _show_step(status: Any, name: str, msg: str) -> None:
    status.update(f"[bold]{name}[/]: {msg}")


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the top-level app."""
    harness_app = CliApp(help="Install and list the real agent harnesses.", no_args_is_help=True)

    @harness_app.command("install")
    def install_cmd(
        names: list[str] = typer.Argument(
            ..., help="builtin mini-swe-agent claude-code codex openclaw qwen-code opencode cline (or 'all')"),
        force: bool = typer.Option(False, "--force", help="reinstall even if the pinned version is present"),
    ) -> None:
        """Install harnesses at their pinned versions (idempotent)."""
        from rich.console import Console

        from harnessrl.harness import install as inst

        console = Console(stderr=True)
        wanted = list(inst.INSTALLABLE) if names == ["all"] else names
        unknown = [n for n in wanted if n not in inst.INSTALLABLE]
        if unknown:
            known = ", ".join(inst.INSTALLABLE)
            console.print(f"[red]unknown harness {', '.join(unknown)}[/]; known: {known}")
            raise typer.Exit(2)
        failed = 0
        for name in wanted:
            with console.status(f"[bold]{name}[/]: checking") as status:
                try:
                    info = inst.install(name, force=force, on_step=functools.partial(_show_step, status, name))
                except inst.InstallError as e:
                    console.print(f"[red]✗ {name}[/]: {e}")
                    failed += 1
                    continue
            how = (f"installed in {info.seconds:.0f}s, {info.size_mb:.0f} MB" if info.seconds
                   else "already installed")
            console.print(f"[green]✓ {name}[/] {info.version} ({how}) {info.path or ''}", soft_wrap=True)
        if failed:
            raise typer.Exit(1)

    @harness_app.command("list")
    def list_cmd(as_json: bool = typer.Option(False, "--json", help="one JSON object on stdout")) -> None:
        """Show each harness: installed?, version, path, size."""
        from rich.console import Console
        from rich.table import Table

        from harnessrl.harness import install as inst

        infos = [inst.installed_info(n, with_size=True) for n in inst.INSTALLABLE]
        if as_json:
            typer.echo(json.dumps({i.name: {"installed": i.installed, "version": i.version,
                                            "pinned": inst.package(i.name).version or None,
                                            "path": str(i.path) if i.path else None,
                                            "size_mb": round(i.size_mb, 1), "note": i.note} for i in infos}))
            return
        table = Table(title=f"harnesses ({inst.cache_dir() / 'harnesses'})")
        for col in ("harness", "installed", "version", "pinned", "size", "path"):
            table.add_column(col)
        for i in infos:
            pinned = inst.package(i.name).version or "-"
            mark = installed_mark(i.installed, i.note)
            size = f"{i.size_mb:.0f} MB" if i.size_mb else "-"
            table.add_row(i.name, mark, i.version or "-", pinned, size, str(i.path or "-"))
        Console().print(table)

    @harness_app.command("check")
    def check_cmd(
        spec: str = typer.Argument(..., help="a harness spec, e.g. 'command[ro=/opt/qwen]:/opt/qwen/bin/qwen -p {task}'"),
        sandbox: str = typer.Option("bwrap", "--sandbox", help="bwrap (as rollouts run) or local"),
        timeout: float = typer.Option(300.0, "--timeout", min=1, help="Seconds for the harness run."),
        max_turns: int = typer.Option(4, "--max-turns", min=1, help="The rollout's call budget."),
        run_dir: Optional[Path] = typer.Option(None, "--run-dir", help="Keep the check's run here (default: a temp dir)."),
        as_json: bool = typer.Option(False, "--json", help="one JSON object on stdout"),
    ) -> None:
        """Run SPEC once against a scripted engine (no model weights) and print what it sent: each
        call's protocol, tools, detected shell tool and prompt tokens, then its exit code and status."""
        import tempfile

        from harnessrl.harness import HarnessConfigError
        from harnessrl.app.harness_check import check_harness

        if sandbox not in ("bwrap", "local"):
            typer.echo("error: --sandbox must be bwrap or local", err=True)
            raise typer.Exit(2)
        with tempfile.TemporaryDirectory(prefix="harnessrl-check-") as tmp:
            try:
                report = check_harness(spec, run_dir or Path(tmp) / "run", sandbox=sandbox, timeout_s=timeout,
                                       max_turns=max_turns)
            except HarnessConfigError as e:
                typer.echo(f"error: {e}", err=True)
                raise typer.Exit(2) from None
        if as_json:
            typer.echo(json.dumps(report.as_dict()))
        else:
            typer.echo(format_report(report))
        if not report.calls:
            raise typer.Exit(1)

    app.add_typer(harness_app, name="harness")


def installed_mark(installed: bool, note: str) -> str:
    """The "installed" cell of `harness list`: yes, no, or no with why ("no (found 1.2, want 1.3)")."""
    if installed:
        return "[green]yes[/]"
    return "[red]no[/]" if note in ("", "not installed") else f"[red]no[/] ({note})"


def format_report(report: Any) -> str:
    """The check report as a few plain lines."""
    lines = [f"harness   {report.spec}", f"rollout   {report.rollout_id}",
             f"status    {report.status} (exit code {report.exit_code})"]
    if report.error:
        lines.append(f"error     {report.error[:400]}")
    lines.append(f"calls     {len(report.calls)}")
    for c in report.calls:
        tools = ", ".join(c.tools) if c.tools else "none"
        shell = f"{c.shell_tool} ({c.shell_kind})" if c.shell_tool else "none found"
        lines.append(f"  #{c.seq} {c.protocol} {c.status}: prompt {c.prompt_tokens} tokens, reply {c.completion_tokens}; "
                     f"shell tool {shell}; {len(c.tools)} tools: {tools[:300]}"
                     + (f"; {c.error}" if c.error else ""))
    hints: list[str] = next((c.suggestions for c in report.calls if c.tools and not c.shell_tool and c.suggestions), [])
    if hints:
        lines.append("  no shell tool recognised: if one of these runs commands, name it with the command: option "
                     + " or ".join(f"shell_tool={h}" for h in hints)
                     + " (KIND: string = a command line, argv = an argv array, list = a list of command strings)")
    if not report.calls:
        lines.append("  the harness made no model call: check its base URL / key variables (docs/harnesses.md)")
    lines.append(f"final     {report.final_message[:200]!r}")
    return "\n".join(lines)
