"""`harnessrl profile RUN_DIR`: the cost budget of a run (profile/run_profile.py), as rich tables on a
terminal, aligned plain text otherwise (a pipe, a log), or one JSON object with `--json`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.console import Console


def profile(run_dir: Path = typer.Argument(..., help="a run dir (harnessrl train's output.run_dir)"),
            as_json: bool = typer.Option(False, "--json", help="one JSON object (seconds, shares, tokens)")) -> None:
    """Cost budget of a run: wall and CPU seconds per step phase, per step and per rollout component
    (harness, sandboxes, proxy, verifier, copy-out; engine prefill/decode), and the share of the
    prompt tokens the engine's prefix cache served. What the run did not record is listed."""
    from harnessrl.profile.run_profile import profile_run_dir
    from harnessrl.profile.tables import plain_text, profile_json, rich_tables
    from harnessrl.store.schema import DB_NAME

    console = Console()
    if not (run_dir / DB_NAME).is_file():
        Console(stderr=True).print(f"[red]profile refused:[/red] {run_dir} holds no run (no {DB_NAME})", soft_wrap=True)
        raise typer.Exit(2)
    prof = profile_run_dir(run_dir)
    if as_json:
        sys.stdout.write(json.dumps(profile_json(prof, str(run_dir)), indent=1) + "\n")
    elif console.is_terminal:
        for part in rich_tables(prof, run_dir.name):
            console.print(part)
    else:
        sys.stdout.write(plain_text(prof, run_dir.name) + "\n")
