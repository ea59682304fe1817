"""`edgelab device ...` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="device commands", no_args_is_help=True)
