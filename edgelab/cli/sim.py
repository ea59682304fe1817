"""`edgelab sim ...` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="sim commands", no_args_is_help=True)
