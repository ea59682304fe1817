"""Start-up: `import edgelab.cli` and `edgelab --help` load no heavy library.

Checked in a fresh interpreter's ``sys.modules`` (the way harlequin checks its CLI's
imports): the database, SSH, TUI, numeric and WebSocket stacks are imported by the
commands that use them, when they run. CPU figures live in ``benchmarks/cli_start.py``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("sqlalchemy", "sqlmodel", "paramiko", "textual", "numpy", "websockets", "alembic", "pydantic")
# typer 0.29 coerces every parameter through pydantic (typer._adapters) when a command parses; the
# pin in pyproject.toml (typer < 0.29) keeps it out of every command that does not use the ORM.
TYPER_OWN: set[str] = set()

_PROBE = r"""
import json, sys
HEAVY = {heavy!r}
{body}
print(json.dumps(sorted({{m.split(".")[0] for m in sys.modules}} & set(HEAVY))))
"""


def _loaded(body: str, env: dict[str, str] | None = None, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    code = _PROBE.format(heavy=heavy, body=body)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_cli_loads_no_heavy_library() -> None:
    assert _loaded("import edgelab.cli") == []


def _main_body(argv: list[str]) -> str:
    """Code that runs ``edgelab ARGV`` in the probe's interpreter, its stdout kept in ``buf``."""
    return (
        "import contextlib, io\n"
        "from edgelab.cli import main\n"
        f"sys.argv = ['edgelab', *{argv!r}]\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        "    try:\n"
        "        main()\n"
        "    except SystemExit as e:\n"
        "        assert e.code in (0, None), e.code\n"
    )


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["device", "--help"], ["deploy", "--help"], ["sim", "up", "--help"], ["--version"]],
    ids=" ".join,
)
def test_help_loads_no_heavy_library(argv) -> None:
    body = _main_body(argv) + "assert buf.getvalue().strip(), 'no help printed'\n"
    allowed = set() if argv in (["--help"], ["--version"]) else TYPER_OWN
    assert set(_loaded(body)) <= allowed


def test_lazy_root_lists_every_command_of_the_app() -> None:
    """The lazily built root lists and builds exactly what typer's eager conversion would."""
    import typer.main

    from edgelab.cli import app
    from edgelab.cli.root import lazy_root

    eager = typer.main.get_command(app)
    lazy = lazy_root(app)
    ctx = lazy.make_context("edgelab", ["--help"], resilient_parsing=True)
    assert lazy.list_commands(ctx) == eager.list_commands(ctx)
    for name in eager.list_commands(ctx):
        built = lazy.get_command(ctx, name)
        assert built is not None and built.name == eager.get_command(ctx, name).name
        assert [p.name for p in built.params] == [p.name for p in eager.get_command(ctx, name).params]


def test_help_lists_commands_with_their_summaries(dbpath) -> None:
    out = subprocess.run(
        [sys.executable, "-c", "from edgelab.cli import main; main()", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    for name in ("device", "deploy", "probe", "profile", "sim", "watch"):
        assert any(line.split()[:1] == [name] for line in lines), (name, out.stdout)
    assert "The device inventory" in out.stdout


def test_device_ls_json_on_sqlite_loads_no_orm_no_rich_no_transport(dbpath) -> None:
    """A listing of a SQLite database at the schema head reads it with the standard library
    (``store.quickread``) and formats addresses without the transport classes."""
    import os

    env = {**os.environ, "EDGELAB_DB": str(dbpath), "EDGELAB_DB_CREATE": "1"}
    for i in range(3):
        add = subprocess.run(
            [sys.executable, "-c", "from edgelab.cli import main; main()", "device", "add", f"d{i}"]
            + ["--ssh", f"lab@127.0.0.{i + 2}:22"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert add.returncode == 0, add.stderr
    body = _main_body(["device", "ls", "--json"]) + (
        "assert [d['name'] for d in json.loads(buf.getvalue())] == ['d0', 'd1', 'd2'], buf.getvalue()\n"
        "assert 'edgelab.transport.base' not in sys.modules\n"
    )
    assert set(_loaded(body, env=env, heavy=(*HEAVY, "rich"))) <= TYPER_OWN
