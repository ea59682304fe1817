"""`edgelab facts ...`: `facts parse FILE...` reads captured outputs offline (a colleague's paste,
a stored raw snapshot), detects which command produced each one, and shows what it says."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from edgelab.cli.common import console, emit_error, escape, print_json

app = typer.Typer(help="Device facts: parse captured command outputs into typed facts.", no_args_is_help=True)

MAX_VALUES_SHOWN = 60


def _typed_rows(data: Any, prefix: str = "") -> list[tuple[str, Any]]:
    """Nested facts dict -> (dotted key, value) for every non-empty leaf."""
    rows: list[tuple[str, Any]] = []
    if isinstance(data, dict) and not (prefix.endswith(("temperatures_c", "rails_mw", "software"))):
        for k, v in data.items():
            rows += _typed_rows(v, f"{prefix}.{k}" if prefix else k)
    elif isinstance(data, list) and data and isinstance(data[0], dict):
        for i, v in enumerate(data):
            rows += _typed_rows(v, f"{prefix}[{i}]")
    elif data not in (None, [], {}, ""):
        rows.append((prefix, data))
    return rows


def _fmt(v: Any) -> str:
    if isinstance(v, list):
        return ", ".join(str(x) for x in v)
    if isinstance(v, dict):
        return ", ".join(f"{k}={x}" for k, x in v.items())
    return str(v)


def _render(path: str, res) -> None:
    from rich.table import Table

    console.rule(f"[bold]{escape(path)}[/]  [dim]detected:[/] {escape(res.command)}", align="left")
    typed = {k: v for k, v in res.facts.to_dict().items() if k not in ("provenance", "warnings")}
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("group", style="cyan")
    table.add_column("fact")
    table.add_column("value", overflow="fold")
    for key, value in _typed_rows(typed):
        group, _, rest = key.partition(".")
        if not rest:
            group, rest = key.split("[")[0], key
        table.add_row(escape(group), escape(rest), escape(_fmt(value)))
    if table.row_count:
        console.print(table)
    values = res.flat()
    raw = Table(title="as printed", title_justify="left", show_header=False, box=None, pad_edge=False)
    raw.add_column("key", style="dim")
    raw.add_column("value", overflow="fold")
    for key, value in list(values.items())[:MAX_VALUES_SHOWN]:
        raw.add_row(escape(str(key)), escape(_fmt(value)))
    console.print(raw)
    if len(values) > MAX_VALUES_SHOWN:
        console.print(f"[dim]... {len(values) - MAX_VALUES_SHOWN} more values (--json shows all)[/]")
    for w in res.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)


@app.command("parse")
def parse(
    files: Annotated[
        list[Path], typer.Argument(help="Captured outputs (cat, nvidia-smi, getprop, systeminfo ...).")
    ],
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")] = False,
    as_command: Annotated[
        str | None,
        typer.Option("--as", help="Skip detection: parse as this command id (e.g. lscpu, getprop)."),
    ] = None,
) -> None:
    """Parse captured outputs offline, detecting which command produced each one."""
    from edgelab.errors import BadCapture
    from edgelab.probe.capture import read_capture
    from edgelab.probe.detect import BY_NAME, detect

    if as_command and as_command not in BY_NAME:
        emit_error(f"unknown command id {as_command!r}; known: {', '.join(BY_NAME)}")
        raise typer.Exit(2)
    results: list[dict[str, Any]] = []
    failed = bad_input = False
    for path in files:
        try:
            data = path.read_bytes()
        except OSError as exc:
            emit_error(f"{path}: cannot read ({exc.strerror or exc})")
            failed = True
            continue
        try:
            data = read_capture(str(path), data)
        except BadCapture as err:
            emit_error(str(err))
            bad_input = True
            continue
        cmd = BY_NAME[as_command] if as_command else detect(data)
        if cmd is None:
            known = ", ".join(dict.fromkeys(c.command for c in BY_NAME.values()))
            emit_error(f"{path}: unknown format; recognized commands: {known}")
            failed = True
            continue
        res = cmd.parse(data)
        if json_out:
            results.append(
                {
                    "file": str(path),
                    "command": res.command,
                    "command_id": cmd.name,
                    "facts": res.flat(),
                    "typed": res.facts.to_dict(),
                    "warnings": res.warnings,
                }
            )
        else:
            _render(str(path), res)
    if json_out:
        print_json(results)
    if bad_input:
        raise typer.Exit(2)  # a file that is no command output: bad input, a usage error
    if failed:
        raise typer.Exit(1)
