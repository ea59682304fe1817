"""The ``edgelab`` command: thin typer commands over the domain layer."""

from __future__ import annotations

import typer

from edgelab import __version__
from edgelab.cli import artifact, deploy, device, facts, probe, push, runs, runtime, sim, tui, watch  # noqa: I001 - issue 4 (artifacts, push, runtimes)
from edgelab.cli import bench as bench_cli  # issues 5+6: the measured-run protocol
from edgelab.cli import matrix as matrix_cli
from edgelab.cli import metrics as metrics_cli  # noqa: I001 - issue 6 (runs, watch, metrics)
from edgelab.cli import play as play_cli
from edgelab.cli.common import state

app = typer.Typer(
    name="edgelab",
    help="Run an edge-AI device lab: inventory, probe, push, deploy, live metrics, playbooks.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(device.app, name="device")
app.add_typer(sim.app, name="sim")
app.add_typer(facts.app, name="facts")
probe.register(app, facts.app)
app.add_typer(artifact.app, name="artifact")
app.add_typer(runtime.app, name="runtime")
push.register(app)
app.add_typer(runs.app, name="runs")
app.add_typer(metrics_cli.app, name="metrics")
watch.register(app)
bench_cli.register(app)
deploy.register(app)
tui.register(app)
play_cli.register(app)
app.add_typer(matrix_cli.app, name="matrix")


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
) -> None:
    state.db = db


def main() -> None:
    app()
