"""`harnessrl` command line. Each stage registers its own commands from `<stage>/cli.py`;
those modules import only typer/rich at top level so `harnessrl --help` stays fast."""

from __future__ import annotations

import importlib

import typer

app = typer.Typer(
    name="harnessrl",
    help="RL for LLM agents through real, unmodified agent harnesses.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

# Stages that contribute commands, in the order they appear in --help.
_STAGES = ("engine", "proxy", "harness", "tasks", "rollout", "tree", "run")

for _stage in _STAGES:
    _mod = importlib.import_module(f"harnessrl.{_stage}.cli")
    _mod.register(app)


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
