"""How every `harnessrl` command shows its parameters in --help: the conventions of typer/click tools.

- a switch (`--json`, `--resume`, `--help`) shows no value placeholder;
- a positional shows as its name in capitals, `RUN_DIR` (`[RUN_DIR]` when optional, `RUN_DIR...`
  when it takes several), in the usage line and the arguments panel;
- a repeatable option shows the type of one value (`<str>`, not `<list[str]>`): its help says it repeats;
- a bound shows once, in one style, next to the type: `<int> [x>=1]` (typer's own notation; the
  serving flags of app/flags.py write their config field's bound the same way).

`CliApp` is a typer.Typer whose commands and sub-apps are built with these classes:

    app = CliApp(help="...")
    app.command("serve")(serve)
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperCommand, TyperGroup


def positional_name(param: Any) -> str:
    """A positional's name as usage lines write it: RUN_DIR, [RUN_DIR], RUN_DIR..."""
    name = param.metavar or param.name.upper()
    name = name if param.required else f"[{name}]"
    return name + ("..." if param.nargs != 1 else "")


def one_value_type(label: str) -> str:
    """`<list[str]>` -> `<str>`; `<int range>` -> `<int>` (the bound is shown beside it); else as it is."""
    inner = label[1:-1] if label.startswith("<") and label.endswith(">") else None
    if inner is None:
        return label
    if inner.startswith("list[") and inner.endswith("]"):
        inner = inner[5:-1]
    return f"<{inner.removesuffix(' range')}>"


def restyle(param: Any, ctx: Any = None) -> None:
    """Set `param`'s placeholder (metavar) to the conventions above; a metavar given explicitly stays."""
    display = getattr(param, "display_type", None)  # typer >= 0.2x labels types itself: <list[str]>
    if param.param_type_name == "argument":
        if param.metavar is None:
            param.metavar = param.name.upper()
        if display is not None and ctx is not None:  # the type column of the arguments panel
            label = one_value_type(display(ctx))
            param.display_type_rich = lambda ctx: label
        return
    if getattr(param, "is_flag", False) and not getattr(param, "count", False):
        param.metavar = ""
        return
    if param.metavar is None and display is not None and ctx is not None:
        param.metavar = one_value_type(display(ctx))


class ClickStyleCommand(TyperCommand):
    """A typer command whose --help follows the conventions of this module."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        for p in params:
            restyle(p, ctx)
        return params

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        return pieces + [positional_name(p) for p in self.get_params(ctx) if p.param_type_name == "argument"]


class ClickStyleGroup(TyperGroup):
    """A typer group (the top-level app, `harnessrl harness`, ...) with the same --help conventions."""

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        for p in params:
            restyle(p, ctx)
        return params


class CliApp(typer.Typer):
    """typer.Typer building ClickStyleCommand commands and ClickStyleGroup groups."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", ClickStyleGroup)
        super().__init__(**kwargs)

    def command(self, name: str | None = None, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", ClickStyleCommand)
        return super().command(name, **kwargs)
