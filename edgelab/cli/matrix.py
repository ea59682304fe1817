"""`edgelab matrix`: the qualification matrix (12 device rows x 5 models); `matrix set` by hand."""

from __future__ import annotations

from typing import Annotated

import typer

from edgelab.cli.common import console, escape, fail_from, open_engine, print_json
from edgelab.errors import ConfigError

app = typer.Typer(
    help="The qualification matrix: pipeline x device-configuration cells.",
    invoke_without_command=True,
    no_args_is_help=False,
)

_STYLE = {
    "qualified": "bold green",
    "unproven": "bold red",
    "PASS": "green",
    "PARTIAL": "yellow",
    "FAILED": "bold red",
    "BLOCKED": "red",
    "REJECTED": "magenta",
    "profiled": "green",
    "executes": "cyan",
    "correct": "cyan",
    "artifact_ready": "blue",
    "blocked": "bold red",
    "rejected": "magenta",
    "none": "dim",
}


@app.callback()
def show(
    ctx: typer.Context,
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")] = False,
    cell: Annotated[
        str | None,
        typer.Option("--cell", help="One cell: ROW/PIPELINE (e.g. galaxy-s25/qwen3-tts-0.6b or 9/2)."),
    ] = None,
) -> None:
    """Show the 60 cells (or one, with its history)."""
    from rich.table import Table

    if ctx.invoked_subcommand is not None:
        return
    from edgelab.matrix import cell_dict, matrix_rows, resolve_cell
    from edgelab.store.db import session_scope
    from edgelab.store.matrix import history

    engine = open_engine()
    try:
        with session_scope(engine) as s:
            if cell:
                c = resolve_cell(s, cell)
                data = cell_dict(c)
                data["history"] = [
                    {
                        "at": h.at.isoformat(),
                        "source": h.source,
                        "before": h.before,
                        "after": h.after,
                        "evidence": h.evidence,
                        "note": h.note,
                    }
                    for h in history(s, c.id)
                ]
                from edgelab.matrix.evidence import judge

                data["evidence_check"] = [
                    v.as_dict() for v in judge(s, list(c.evidence), c.row_key, c.pipeline)
                ]
                cells = None
            else:
                cells = [cell_dict(c) for c in matrix_rows(s)]
    except ConfigError as err:  # bad input here is a usage error: exit 2 (root handler: 1)
        fail_from(err, code=2)
    if cell:
        if json_out:
            print_json(data)
            return
        for key in (
            "id",
            "row_label",
            "col_label",
            "stage",
            "functional",
            "performance",
            "failing_layer",
            "reason",
            "next_experiment",
            "evidence",
            "demo_evidence",
            "updated_at",
            "updated_by",
        ):
            console.print(f"[bold]{key:>16}[/] {escape(str(data[key]))}", highlight=False)
        for h in data["history"]:
            console.print(
                f"  {h['at']} {escape(str(h['source']))}: {h['before'].get('stage')} -> "
                f"{h['after'].get('stage')} {escape(str(h['note'] or ''))}",
                highlight=False,
            )
        for v in data["evidence_check"]:  # would each run qualify this cell, and if not, why
            verdict = "qualifying evidence" if v["ok"] else "not qualifying: " + "; ".join(v["failures"])
            console.print(f"  run {escape(v['run'])}: {escape(verdict)}", highlight=False)
        return
    if json_out:
        print_json(cells)
        return
    from edgelab.matrix.layout import COLUMNS, ROWS
    from edgelab.views.matrix import cell_words, load_matrix

    table = Table(title="qualification matrix (functional or stage / performance)", expand=False)
    table.add_column("#", justify="right")
    table.add_column("device configuration", no_wrap=True)
    for col in COLUMNS:
        table.add_column(col.label)
    grid = {(c.row, c.col): cell_words(c) for c in load_matrix(engine)}  # the TUI grid's words, uncoloured
    for row in ROWS:
        out = []
        for col in COLUMNS:
            w = grid[(row.index, col.index)]
            style = _STYLE.get(w.tone or "", "")
            first = f"[{style}]{escape(w.first)}[/]" if style else escape(w.first)
            second = ("perf " if w.second_is_performance else "") + escape(w.second)
            out.append(first + (" (v)" if w.virtual else "") + (f"\n{second}" if w.second else ""))
        table.add_row(str(row.index), escape(row.label), *out)
    console.print(table)
    console.print(
        f"{len(cells)} cells; (v) = virtual evidence only, never qualifies; * = qualified on a real device; "
        "feas./impl. = a feasibility or implementation blocker; `edgelab matrix next` says each cell's "
        "next step or blocker, `edgelab matrix fill` records what the lab knows",
        highlight=False,
    )
    _unserved(engine)


def _unserved(engine) -> None:
    """Inventory devices that serve no row (the Jetsons: not in the study), and why."""
    from edgelab.matrix.fill import serving
    from edgelab.store.db import session_scope

    with session_scope(engine, write=False) as s:
        _rows, unserved = serving(s)
    for u in unserved:
        console.print(f"[dim]no row: {escape(u.device)}: {escape(u.why)}[/]", highlight=False)


def _who() -> str:
    """The operator recorded with a hand-made change (the OS user, as every owner record reads it; no secret)."""
    from edgelab.identity import identity

    return identity().user


@app.command("set")
def set_(
    cell: Annotated[str, typer.Argument(help="ROW/PIPELINE, e.g. galaxy-s25/qwen3-tts-0.6b or 9/2.")],
    status: Annotated[
        str | None,
        typer.Option(
            "--status",
            help="A functional status word (PASS, PARTIAL, "
            "COMPONENT, PROFILE_ONLY, FAILED, REJECTED, BLOCKED) or a stage.",
        ),
    ] = None,
    performance: Annotated[str | None, typer.Option("--performance", help="Performance status word.")] = None,
    stage: Annotated[
        str | None,
        typer.Option(
            "--stage", help="artifact_ready, correct, executes, profiled, qualified, blocked, rejected."
        ),
    ] = None,
    evidence: Annotated[list[str] | None, typer.Option("--evidence", help="A run id (repeatable).")] = None,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (required for blocked/rejected).")
    ] = None,
    layer: Annotated[str | None, typer.Option("--layer", help="Failing layer of a blocked cell.")] = None,
    next_: Annotated[str | None, typer.Option("--next", help="Next experiment of a blocked cell.")] = None,
    kind: Annotated[
        str | None,
        typer.Option(
            "--kind",
            help="A blocker's kind: feasibility (the device cannot) or implementation (the lab has yet to "
            "build it). Required for blocked; rejected is feasibility.",
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")] = False,
) -> None:
    """Record evidence gathered by hand; PASS needs a real run as --evidence, and qualifying from a
    virtual-device run is refused."""
    from edgelab.matrix import cell_dict, set_cell
    from edgelab.store.db import session_scope

    if not any((status, performance, stage, evidence, reason, layer, next_, kind)):
        fail_from(
            ConfigError("nothing to set", remedy="give --status, --stage, --performance or --evidence"),
            code=2,
        )
    engine = open_engine()
    try:
        with session_scope(engine) as s:
            c, notes = set_cell(
                s,
                cell,
                status=status,
                performance=performance,
                stage=stage,
                evidence=list(evidence or []),
                reason=reason,
                layer=layer,
                next_experiment=next_,
                kind=kind,
                source=f"manual:{_who()}",
            )
            data = cell_dict(c)
    except ConfigError as err:  # bad input here is a usage error: exit 2 (root handler: 1)
        fail_from(err, code=2)
    if json_out:
        print_json({**data, "notes": notes})
        return
    console.print(
        f"{escape(data['id'])}: {data['stage']} (functional {data['functional'] or '-'}, "
        f"performance {data['performance'] or '-'})",
        highlight=False,
    )
    for n in notes:
        console.print(f"  note: {escape(n)}", highlight=False)


def _finding_rows(findings) -> None:
    from rich.table import Table

    table = Table(box=None, header_style="bold", expand=False)
    for name in ("cell", "", "device", "next step or blocker"):
        table.add_column(name, overflow="fold")
    for f in findings:
        what = {"rejected": "[magenta]rejected[/]", "blocked": "[red]blocked[/]", "next": "[cyan]next[/]"}[
            f.outcome
        ]
        if f.kind:
            what += f" {f.kind}"
        text = f.next_step if f.outcome == "next" else f"{f.layer}: {f.reason} -> {f.next_step}"
        device = (f.device or "-") + (" (virtual)" if f.virtual else "")
        table.add_row(escape(f.cell), what, escape(device), escape(text))
    console.print(table)


@app.command("next")
def next_(
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")] = False,
) -> None:
    """For every cell, the next step (which device, which command) or the blocker, from the lab's
    devices and plans now (nothing is written; `edgelab matrix fill` records it in the cells)."""
    from edgelab.matrix.fill import assess

    findings, unserved = assess(open_engine())
    if json_out:
        print_json({"cells": [f.to_dict() for f in findings], "unserved": [u.__dict__ for u in unserved]})
        return
    _finding_rows(findings)
    for u in unserved:
        console.print(f"[dim]no row: {escape(u.device)}: {escape(u.why)}[/]", highlight=False)


@app.command("fill")
def fill_(
    json_out: Annotated[bool, typer.Option("--json", help="Machine-readable output on stdout.")] = False,
) -> None:
    """Record what the lab knows in the cells: capacity refusals as rejected, missing builds,
    templates and models as blocked (each with layer, reason, evidence, next experiment and kind),
    and every open cell's next step. Cells decided by hand or by a playbook keep their status."""
    from edgelab.matrix.fill import fill

    findings, unserved, changed = fill(open_engine())
    if json_out:
        print_json(
            {
                "changed": changed,
                "cells": [f.to_dict() for f in findings],
                "unserved": [u.__dict__ for u in unserved],
            }
        )
        return
    counts: dict[str, int] = {}
    for f in findings:
        counts[f.outcome] = counts.get(f.outcome, 0) + 1
    console.print(
        f"{changed} cell(s) changed: {counts.get('rejected', 0)} rejected, {counts.get('blocked', 0)} blocked, "
        f"{counts.get('next', 0)} with a next step (see `edgelab matrix` and `edgelab matrix next`)",
        highlight=False,
    )
