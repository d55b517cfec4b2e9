"""Commands of the harness stage (registered by harnessrl.cli). Keep top-level imports light.

  harnessrl harness install NAME... [--force]   pinned versions into $HARNESSRL_CACHE/harnesses/<name>
  harnessrl harness list [--json]               installed? version, path, size
"""

from __future__ import annotations

import json

import typer


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the top-level app."""
    harness_app = typer.Typer(help="Install and list the real agent harnesses.", no_args_is_help=True)

    @harness_app.command("install")
    def install_cmd(
        names: list[str] = typer.Argument(
            ..., help="builtin mini-swe-agent claude-code codex openclaw (or 'all')"),
        force: bool = typer.Option(False, "--force", help="reinstall even if the pinned version is present"),
    ) -> None:
        """Install harnesses at their pinned versions (idempotent)."""
        from rich.console import Console

        from harnessrl.harness import install as inst

        console = Console(stderr=True)
        wanted = list(inst.HARNESS_NAMES) if names == ["all"] else names
        unknown = [n for n in wanted if n not in inst.HARNESS_NAMES]
        if unknown:
            known = ", ".join(inst.HARNESS_NAMES)
            console.print(f"[red]unknown harness {', '.join(unknown)}[/]; known: {known}")
            raise typer.Exit(2)
        failed = 0
        for name in wanted:
            with console.status(f"[bold]{name}[/]: checking") as status:
                try:
                    info = inst.install(name, force=force,
                                        on_step=lambda msg, n=name: status.update(f"[bold]{n}[/]: {msg}"))
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

        infos = [inst.installed_info(n, with_size=True) for n in inst.HARNESS_NAMES]
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
            mark = "[green]yes[/]" if i.installed else f"[red]no[/] {i.note}"
            size = f"{i.size_mb:.0f} MB" if i.size_mb else "-"
            table.add_row(i.name, mark, i.version or "-", pinned, size, str(i.path or "-"))
        Console().print(table)

    app.add_typer(harness_app, name="harness")
