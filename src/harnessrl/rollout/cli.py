"""Commands of the rollout stage (registered by harnessrl.cli). Keep top-level imports light."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this stage's commands to the top-level app."""
