"""The ``edgelab`` command: thin typer commands over the domain layer."""

from __future__ import annotations

import typer

from edgelab import __version__
from edgelab.cli import (
    artifact,
    bench,
    compare,
    deploy,
    device,
    facts,
    forward,
    lease,
    matrix,
    metrics,
    model,
    play,
    probe,
    profile,
    push,
    runs,
    runtime,
    shell,
    sim,
    store,
    tui,
    watch,
)
from edgelab.cli.common import reset_consoles, state
from edgelab.cli.root import ErrorsGroup

app = typer.Typer(
    name="edgelab",
    cls=ErrorsGroup,  # one line per fault a command did not catch, never a traceback (--debug shows it)
    help="Run an edge-AI device lab: inventory, probe, push, deploy, live metrics, playbooks.",
    no_args_is_help=True,
    # Plain click help: no Rich/Markdown import on every --help, and text that grep and a pipe read whole.
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
# In the order an operator meets them: the lab, its devices, what they are, what goes on them,
# what runs there, what it measured, and the CI and qualification work on top.
app.add_typer(sim.app, name="sim")
app.add_typer(device.app, name="device")
app.add_typer(facts.app, name="facts")
probe.register(app, facts.app)
profile.register(app)
lease.register(app)
shell.register(app)
forward.register(app)
app.add_typer(artifact.app, name="artifact")
app.add_typer(model.app, name="model")
app.add_typer(runtime.app, name="runtime")
push.register(app)
store.register(app)
deploy.register(app)
bench.register(app)
compare.register(runs.app)
app.add_typer(runs.app, name="runs")
watch.register(app)
app.add_typer(metrics.app, name="metrics")
play.register(app)
app.add_typer(matrix.app, name="matrix")
tui.register(app)


def _log_level(value: str | None) -> str | None:
    from edgelab.logs import parse_level

    if value is not None:
        try:
            parse_level(value)
        except ValueError as err:
            raise typer.BadParameter(str(err)) from None
    return value


def _version(value: bool) -> None:
    if value:
        typer.echo(f"edgelab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    db: str = typer.Option(
        None,
        "--db",
        envvar="EDGELAB_DB",
        help="Database URL or SQLite path (default ./edgelab.db; PostgreSQL: postgresql+psycopg://...).",
    ),
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Show the version."
    ),
    debug: bool = typer.Option(
        False,
        "--debug",
        envvar="EDGELAB_DEBUG",
        help="Show the full traceback of an error instead of one line.",
    ),
    create: bool = typer.Option(
        False,
        "--create",
        help="Create the --db / EDGELAB_DB SQLite file if it does not exist "
        "(without it a mistyped path is an error, not a new empty database).",
    ),
    log_level: str = typer.Option(
        None,
        "--log-level",
        envvar="EDGELAB_LOG",
        callback=_log_level,
        metavar="LEVEL",
        help="Log records at this level and above on stderr: debug, info, warning "
        "(default), error, critical. Secrets are masked.",
    ),
) -> None:
    from edgelab.logs import setup

    state.db = db
    reset_consoles()
    state.debug = debug
    setup(log_level)
    source = getattr(ctx.get_parameter_source("db"), "name", None)
    if db and not create and source in ("COMMANDLINE", "ENVIRONMENT"):
        _refuse_missing_db(db, "EDGELAB_DB" if source == "ENVIRONMENT" else "--db")


def _refuse_missing_db(db: str, named_by: str = "--db") -> None:
    """A database named by ``--db`` or ``EDGELAB_DB`` whose SQLite file does not exist is refused
    (exit 2) unless ``--create``: a typo must not silently start an empty database, wherever it
    was typed. Only the default ``./edgelab.db`` is created unasked; ``EDGELAB_DB_CREATE=1`` lets
    scripts create any."""
    import os

    if os.environ.get("EDGELAB_DB_CREATE", "") not in ("", "0"):
        return
    from edgelab.cli.common import fail

    path = sqlite_file(db)
    if path is not None and not os.path.exists(path):
        fail(
            f"no database at {path} (named by {named_by})",
            "check the path, or pass --create to make a new database there",
            code=2,
        )


def sqlite_file(db: str) -> str | None:
    """The file a SQLite ``--db`` value names (None: not SQLite, or in memory)."""
    if "://" not in db:
        return db
    if not db.startswith("sqlite:"):
        return None
    rest = db.split("://", 1)[1].split("?", 1)[0]
    path = rest[1:] if rest.startswith("/") else rest
    return None if path in ("", ":memory:") else path


def main() -> None:
    import sys

    from edgelab.cli.root import lazy_root

    sys.excepthook = _masked_traceback  # --debug shows tracebacks: never with a password in them
    lazy_root(app)()


def _masked_traceback(kind, value, tb) -> None:
    """A traceback as Python prints it, passed through the log mask (URL credentials, tokens)."""
    import sys
    import traceback

    from edgelab.logs import redact

    sys.stderr.write(redact("".join(traceback.format_exception(kind, value, tb))))
