"""Keep the terminal for the run: library output goes to `<run_dir>/run.log`.

vLLM (engine core and workers are child processes, logging to stdout), transformers, torch,
Triton and the harness processes all write to file descriptors 1 and 2, which children inherit.
`library_logs` points both at the log file for the length of the run and hands back a console
bound to a duplicate of the original terminal, so only the run's own lines reach the screen.
`verbose=True` leaves everything on the terminal.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from rich.console import Console

LOG_NAME = "run.log"


@contextmanager
def library_logs(run_dir: Path, console: Console, verbose: bool = False) -> Iterator[tuple[Console, Path | None]]:
    """(console for the run's own output, the log file or None when verbose)."""
    if verbose:
        yield console, None
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / LOG_NAME
    width, is_terminal = console.width, console.is_terminal
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = (os.dup(1), os.dup(2))
    term = os.fdopen(os.dup(saved[0]), "w", buffering=1, encoding="utf-8", errors="replace")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.dup2(fd, 1)
        os.dup2(fd, 2)
    finally:
        os.close(fd)
    run_console = Console(file=term, width=width, force_terminal=is_terminal, force_interactive=is_terminal,
                          quiet=console.quiet)
    try:
        yield run_console, path
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd_ in saved:
            os.close(fd_)
        term.close()
