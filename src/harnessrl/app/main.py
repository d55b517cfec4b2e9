"""`harnessrl` command line. Each command module of this package registers its commands; those
modules import only typer/rich (and light library modules) at top level so `harnessrl --help`
stays fast."""

from __future__ import annotations

import importlib

from harnessrl.app.cli_style import CliApp

app = CliApp(
    name="harnessrl",
    help="RL for LLM agents through real, unmodified agent harnesses.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)

# Command modules of harnessrl.app, in the order their commands appear in --help.
_COMMANDS = ("model", "serve", "harness", "tasks", "rollout", "demos", "tree", "train")

for _name in _COMMANDS:
    importlib.import_module(f"harnessrl.app.{_name}").register(app)


def main() -> None:  # pragma: no cover - console entry point
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
