"""`edgelab facts ...` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="facts commands", no_args_is_help=True)
