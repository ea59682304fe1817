"""The ``edgelab`` command: thin typer commands over the domain layer."""

from __future__ import annotations

import typer

from edgelab import __version__
from edgelab.cli import (
    artifact,
    bench,
    deploy,
    device,
    facts,
    matrix,
    metrics,
    play,
    probe,
    push,
    runs,
    runtime,
    sim,
    tui,
    watch,
)
from edgelab.cli.common import state
from edgelab.cli.guard import GuardedGroup

app = typer.Typer(
    name="edgelab",
    cls=GuardedGroup,  # no traceback for a fault a command did not catch (--debug shows it)
    help="Run an edge-AI device lab: inventory, probe, push, deploy, live metrics, playbooks.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)
# In the order an operator meets them: the lab, its devices, what they are, what goes on them,
# what runs there, what it measured, and the CI and qualification work on top.
app.add_typer(sim.app, name="sim")
app.add_typer(device.app, name="device")
app.add_typer(facts.app, name="facts")
probe.register(app, facts.app)
app.add_typer(artifact.app, name="artifact")
app.add_typer(runtime.app, name="runtime")
push.register(app)
deploy.register(app)
bench.register(app)
app.add_typer(runs.app, name="runs")
watch.register(app)
app.add_typer(metrics.app, name="metrics")
play.register(app)
app.add_typer(matrix.app, name="matrix")
tui.register(app)

def _version(value: bool) -> None:
    if value:
        typer.echo(f"edgelab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    db: str = typer.Option(
        None,
        "--db",
        envvar="EDGELAB_DB",
        help="Database URL or SQLite path (default ./edgelab.db; PostgreSQL: postgresql+psycopg://...).",
    ),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Show the version."),
    debug: bool = typer.Option(False, "--debug", envvar="EDGELAB_DEBUG",
                               help="Show the full traceback of an error instead of one line."),
) -> None:
    state.db = db
    state.debug = debug


def main() -> None:
    app()
