"""One meaning per short flag across every `harnessrl` command (e.g. -c is --config wherever it
appears, never --concurrency elsewhere)."""

from __future__ import annotations

from typing import Any

import typer

from harnessrl.app.main import app


def _options(cmd: Any, path: str) -> list[tuple[str, str, str]]:
    """(command path, short flag, long flag) of every option of `cmd` (a click command, as typer
    builds it) and its subcommands."""
    if hasattr(cmd, "commands"):
        return [o for name, sub in cmd.commands.items() for o in _options(sub, f"{path} {name}")]
    out = []
    for p in cmd.params:
        if p.param_type_name == "option":
            shorts = [o for o in p.opts if not o.startswith("--")]
            longs = [o for o in p.opts if o.startswith("--")]
            out += [(path, s, longs[0] if longs else s) for s in shorts]
    return out


def test_each_short_flag_names_one_option_everywhere():
    seen: dict[str, dict[str, str]] = {}
    for path, short, long in _options(typer.main.get_command(app), "harnessrl"):
        seen.setdefault(short, {})[path] = long
    clashes = {s: uses for s, uses in seen.items() if len(set(uses.values())) > 1}
    assert not clashes, clashes
    assert seen["-c"] and set(seen["-c"].values()) == {"--config"}  # rollout, eval and train alike
    assert {"harnessrl rollout", "harnessrl eval", "harnessrl train"} <= set(seen["-c"])
