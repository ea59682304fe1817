"""Shared CLI plumbing: the database option, JSON output, and one-line errors with a remedy."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from edgelab.errors import ConfigError, EdgelabError


def _pipe_width() -> int | None:
    """A pipe has no width to respect: give tables room so grep and awk see whole lines.

    ``COLUMNS`` still wins, as Rich honours it; on a terminal Rich measures the terminal.
    """
    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return None
    return 160


console = Console(width=_pipe_width())
err_console = Console(stderr=True)


@dataclass
class CliState:
    db: str | None = None
    debug: bool = False


state = CliState()


def print_json(data: Any) -> None:
    """Machine-readable output on stdout, nothing else on it."""
    sys.stdout.write(json.dumps(data, indent=2, default=str, sort_keys=False) + "\n")


def fail(message: str, remedy: str | None = None, code: int = 1) -> NoReturn:
    """Exit with one clear line and what to do about it (exit 1: the thing asked failed; 2: usage)."""
    err_console.print(f"[bold red]error:[/] {message}", highlight=False, markup=True)
    if remedy:
        err_console.print(f"  [dim]->[/] {remedy}", highlight=False)
    raise typer.Exit(code)


def fail_from(err: EdgelabError, code: int = 1) -> NoReturn:
    """``err`` as one line + remedy; an error class that fixes its exit code (bad input files: 2) wins."""
    fail(str(err), getattr(err, "remedy", None), getattr(err, "exit_code", None) or code)


JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")]


def open_engine():
    """The database this command works on, migrated; an unusable ``--db`` is a usage error (exit 2)."""
    from edgelab.store.db import get_engine

    try:
        return get_engine(state.db)
    except ConfigError as err:
        fail_from(err, code=2)


def open_session(write: bool = True):
    """A session on :func:`open_engine` that commits on success."""
    from edgelab.store.db import session_scope

    return session_scope(open_engine(), write=write)
