"""`edgelab tui`: open the operator's dashboard on the same database as every other command."""

from __future__ import annotations

from typing import Annotated

import typer

from edgelab.cli.common import fail_from, state
from edgelab.errors import ConfigError


def tui(
    run: Annotated[
        str | None, typer.Option("--run", help="Open this run's live screen on top of the fleet.")
    ] = None,
    poll: Annotated[
        float, typer.Option("--poll", min=0.1, help="Seconds between database reads of the fleet.")
    ] = 2.0,
) -> None:
    """The dashboard: fleet, device pages, live runs, deploy dialog (keys are listed at the bottom)."""
    from edgelab.store.db import get_engine
    from edgelab.tui.app import EdgelabApp

    try:
        engine = get_engine(state.db)
    except ConfigError as err:
        fail_from(err, code=2)
    EdgelabApp(engine, poll_s=poll, open_run=run).run()


def register(app: typer.Typer) -> None:
    app.command("tui")(tui)
