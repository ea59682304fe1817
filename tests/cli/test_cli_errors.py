"""Error output: one plain line on stderr (remedy on the next), never wrapped, never markup,
colour only on a terminal; one handler at the root for every `EdgelabError`."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import typer
from typer.testing import CliRunner

from edgelab.cli.common import error_lines
from edgelab.cli.root import ErrorsGroup
from edgelab.errors import EdgelabError, NotFound

EDGELAB = [sys.executable, "-c", "from edgelab.cli import main; main()"]


def _run(args, dbpath, **env):
    full = {**os.environ, "EDGELAB_DB": str(dbpath), **env}
    return subprocess.run(
        [*EDGELAB, *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, env=full
    )


def test_brackets_survive_and_narrow_terminal_does_not_wrap(dbpath):
    long_name = "s25" + "-x" * 40
    for name in ("[s25]", "a[/x]b", "[bold red]s25[/]", long_name):
        res = _run(["device", "show", name], dbpath, COLUMNS="40")
        assert res.returncode == 1, res.stderr
        lines = res.stderr.splitlines()
        assert len(lines) == 2, res.stderr
        assert lines[0] == f"error: no device named {name!r}", res.stderr
        assert lines[1].startswith("  -> "), res.stderr
        assert "\x1b[" not in res.stderr and res.stdout == ""


def test_colour_only_on_a_terminal(dbpath):
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [*EDGELAB, "device", "show", "[s25]"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=follower,
            env={**os.environ, "EDGELAB_DB": str(dbpath), "TERM": "xterm", "NO_COLOR": ""},
        )
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                data = os.read(leader, 4096)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
        assert proc.wait(timeout=60) == 1
    finally:
        os.close(leader)
        if follower != -1:
            os.close(follower)
    text = b"".join(chunks).decode()
    assert "\x1b[1;31merror:\x1b[0m no device named '[s25]'" in text, text
    assert error_lines("m", "r", colour=False) == "error: m\n  -> r\n"


def test_root_handler_turns_any_edgelab_error_into_one_line():
    app = typer.Typer(cls=ErrorsGroup)

    @app.callback()
    def _root() -> None:
        pass

    @app.command()
    def boom(markup: bool = False) -> None:
        raise NotFound("run [/x] of [s25] " + "is gone " * 20, remedy="see [bold]edgelab runs ls[/]")

    @app.command()
    def other() -> None:
        raise EdgelabError("plain")

    res = CliRunner().invoke(app, ["boom"], env={"COLUMNS": "40"})
    assert res.exit_code == 1 and res.exception is None or isinstance(res.exception, SystemExit)
    assert (
        res.stderr == "error: run [/x] of [s25] " + "is gone " * 20 + "\n  -> see [bold]edgelab runs ls[/]\n"
    )
    res = CliRunner().invoke(app, ["other"])
    assert res.exit_code == 1 and res.stderr == "error: plain\n"


def test_root_handler_exit_codes_and_debug_traceback(dbpath):
    from edgelab.errors import BenchFailed, CatalogError

    app = typer.Typer(cls=ErrorsGroup)

    @app.callback()
    def _root() -> None:
        pass

    @app.command()
    def bad_file() -> None:
        raise CatalogError("devices/x.yaml:3: unknown key 'rams'")

    @app.command()
    def workload() -> None:  # the workload's own exit status is not the CLI's
        raise BenchFailed("bench run r1 failed: exit 127", run_id="r1", remedy="see it", workload_exit=127)

    res = CliRunner().invoke(app, ["bad-file"])
    assert res.exit_code == 2 and res.stderr.startswith(
        "error: devices/x.yaml:3: unknown key 'rams'\n  -> fix"
    )
    res = CliRunner().invoke(app, ["workload"])
    assert res.exit_code == 1 and res.stderr == "error: bench run r1 failed: exit 127\n  -> see it\n"

    plain = _run(["device", "show", "nope"], dbpath)
    assert plain.returncode == 1 and "Traceback" not in plain.stderr
    debug = _run(["--debug", "device", "show", "nope"], dbpath)
    assert debug.returncode == 1 and "Traceback (most recent call last)" in debug.stderr, debug.stderr
    assert "edgelab.errors.NotFound: no device named 'nope'" in debug.stderr, debug.stderr


def test_commands_leave_edgelab_errors_to_the_root_handler():
    """No command repeats the root handler (`except EdgelabError: fail_from(err)`); a command catches
    an error only to do something else (another exit code, JSON, cleanup)."""
    import ast
    from pathlib import Path

    import edgelab.cli

    same = []
    for path in sorted(Path(edgelab.cli.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ExceptHandler) or node.type is None or len(node.body) != 1:
                continue
            call = node.body[0].value if isinstance(node.body[0], ast.Expr) else None
            if (
                ast.unparse(node.type) in ("EdgelabError", "NotFound")
                and isinstance(call, ast.Call)
                and ast.unparse(call.func) == "fail_from"
                and not call.keywords
            ):
                same.append(f"{path.name}:{node.lineno}")
    assert same == [], same


def test_no_help_text_shows_markup():
    """Help is plain text (no rich markup mode): a `[bold]` in a docstring would print as written."""
    import click
    import typer

    from edgelab.cli import app

    root = typer.main.get_command(app)
    seen = []

    def walk(cmd: click.Command, path: list[str]) -> None:
        res = CliRunner().invoke(app, [*path, "--help"])
        assert res.exit_code == 0, (path, res.output)
        for mark in ("[bold]", "[dim]", "[/]", "[red]"):
            assert mark not in res.output, (" ".join(path), mark)
        seen.append(" ".join(path))
        for name, sub in getattr(cmd, "commands", {}).items():
            walk(sub, [*path, name])

    walk(root, [])
    assert "reserve" in seen and "shell" in seen and "matrix fill" in seen
