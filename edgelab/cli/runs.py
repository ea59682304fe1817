"""`edgelab runs ...`: list, show, export and import runs. Thin over edgelab.store.runs / edgelab.metrics."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from edgelab.cli.common import JsonOpt, console, emit_error, escape, fail, fail_from, open_engine, print_json
from edgelab.errors import ConfigError
from edgelab.labels import strategy_label
from edgelab.states import RunState
from edgelab.units import when

app = typer.Typer(
    help="Runs and their results: list, show, export, import the study's records.", no_args_is_help=True
)

STATE_STYLE = {
    RunState.RUNNING: "cyan",
    RunState.FINISHED: "green",
    RunState.FAILED: "red",
    RunState.DEVICE_LOST: "red",
    RunState.STOPPED: "yellow",
    RunState.PENDING: "dim",
}


def _fmt(v: Any, unit: str = "") -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.3g}{unit}" if abs(v) < 10 else f"{v:.0f}{unit}"
    return f"{v}{unit}"


def _headline(summary: dict | None) -> str:
    if not summary:
        return "-"
    parts = []
    if a := summary.get("audio"):
        parts.append(
            f"TTFA p50 {_fmt(a['ttfa_ms']['p50'], ' ms')} (n={a['ttfa_ms']['count']}), "
            f"underruns {a['underruns_at_ttfa']}, RTF p50 {_fmt(a['rtf_streamed']['p50'])}"
        )
    if act := summary.get("action"):
        parts.append(
            f"latency p50/p95 {_fmt(act['latency_ms']['p50'])}/{_fmt(act['latency_ms']['p95'], ' ms')} "
            f"(n={act['latency_ms']['count']}), misses {_fmt(act['deadline_misses'])}"
        )
    if t := summary.get("text"):
        parts.append(
            f"TTFT p50 {_fmt(t['ttft_ms']['p50'], ' ms')}, tok/s p50 {_fmt(t['decode_tok_s']['p50'])}"
        )
    return "; ".join(parts) or "-"


@app.command("ls")
def ls(
    json_out: JsonOpt = False,
    limit: Annotated[int, typer.Option("--limit", help="At most this many, newest first.")] = 50,
    device: Annotated[str | None, typer.Option("--device", help="Only this device's runs.")] = None,
    pipeline: Annotated[str | None, typer.Option("--pipeline", help="Only this pipeline's runs.")] = None,
    run_state: Annotated[str | None, typer.Option("--state", help="Only runs in this state.")] = None,
) -> None:
    """List runs, newest first."""
    from rich.table import Table

    from edgelab.store.db import session_scope
    from edgelab.store.runs import execution_of, get_summary, list_runs

    with session_scope(open_engine(), write=False) as s:
        rows = []
        for r in list_runs(s, limit=limit, device=device, pipeline=pipeline, state=run_state):
            summ = get_summary(s, r.id, "final") or get_summary(s, r.id, "live")
            rows.append(
                {
                    "id": r.id,
                    "created_at": r.created_at,
                    "pipeline": r.pipeline,
                    "device": r.device_name,
                    "runtime": r.runtime,
                    "strategy": r.strategy,
                    "strategy_label": strategy_label(r.strategy, r.runtime),
                    "kind": r.kind,
                    "state": r.state,
                    "virtual": r.virtual,
                    "emulated": bool(execution_of(r).get("emulated")),
                    "summary": summ.metrics if summ else None,
                }
            )
    if json_out:
        print_json(rows)
        return
    table = Table(box=None, header_style="bold")
    for col in ("id", "created", "pipeline", "device", "strategy", "runtime", "kind", "state", "headline"):
        table.add_column(col)
    for r in rows:
        st = r["state"]
        table.add_row(
            r["id"],
            when(r["created_at"], seconds=False),
            escape(r["pipeline"] or "-"),
            escape(r["device"] or "-")
            + (" (virtual)" if r["virtual"] else "")
            + (" EMULATED" if r["emulated"] else ""),
            escape(r["strategy_label"] if r["strategy"] else "-"),
            escape(r["runtime"] or "-"),
            r["kind"],
            f"[{STATE_STYLE.get(st, 'white')}]{st}[/]",
            _headline(r["summary"]),
        )
    console.print(table if rows else "[dim]no runs yet[/]")


@app.command("show")
def show(
    run: Annotated[str, typer.Argument(help="Run id (or a unique prefix).")], json_out: JsonOpt = False
) -> None:
    """One run: state, provenance, summary and its requests."""
    from rich.table import Table

    from edgelab.metrics.results import run_record
    from edgelab.store.db import session_scope
    from edgelab.store.runs import get_run

    with session_scope(open_engine(), write=False) as s:
        rec = run_record(s, get_run(s, run))
    if json_out:
        print_json(rec)
        return
    console.print(
        f"[bold]{rec['id']}[/]  "
        + escape(
            f"{rec['pipeline'] or '-'} on {rec['device'] or '-'}"
            f"{' (virtual)' if rec['virtual'] else ''}"
            f"{' EMULATED (' + str((rec['execution'] or {}).get('label')) + ')' if rec['emulated'] else ''}"
            f"  {rec['strategy_label'] + '  ' if rec['strategy'] else ''}runtime {rec['runtime'] or '-'}  "
        )
        + f"[{STATE_STYLE.get(rec['state'], 'white')}]{rec['state']}[/]"
    )
    if rec["error"]:
        console.print(f"[red]error:[/] {escape(rec['error'])}")
    summary = rec["summary"] or rec["live"]
    console.print(f"summary: {_headline(summary)}" + ("" if rec["summary"] else " [dim](live)[/]"))
    prov = rec["provenance"] or {}
    console.print(
        "provenance: " + escape(", ".join(f"{k}={v}" for k, v in prov.items() if v not in (None, {}, [])))
    )
    table = Table(box=None, header_style="bold")
    for col in ("request", "phase", "band", "ok", "TTFA ms", "play start ms", "underruns", "stall ms", "RTF"):
        table.add_column(col)
    for q in rec["requests"]:
        a = (q["metrics"] or {}).get("audio") or {}
        table.add_row(
            escape(q["request"]),
            q["phase"],
            escape(q["band"] or "-"),
            _fmt(q["ok"]),
            _fmt(a.get("ttfa_ms")),
            _fmt(a.get("playback_start_ms")),
            _fmt(a.get("underruns_at_ttfa")),
            _fmt(a.get("stall_ms_at_ttfa")),
            _fmt(a.get("rtf_streamed")),
        )
    if rec["requests"]:
        console.print(table)


def fail_lines(lines: list[str], remedy: str | None, code: int, more: int = 0):
    """Several error lines (each ``file:line: reason``), the remedy once, then exit ``code``;
    ``more`` bad lines were counted and not kept."""
    from edgelab.errors import MAX_REPORTED

    for line in lines[:MAX_REPORTED]:
        emit_error(line)
    hidden = max(0, len(lines) - MAX_REPORTED) + more
    if hidden:
        emit_error(f"... and {hidden} more bad lines")
    total = len(lines) + more
    fail(
        f"{total} problem{'s' if total != 1 else ''} in the input; nothing was imported",
        remedy,
        code,
    )


@app.command("export")
def export(
    run: Annotated[str, typer.Argument(help="Run id (or a unique prefix).")],
    json_out: Annotated[bool, typer.Option("--json", help="JSON on stdout (the default).")] = True,
    samples: Annotated[
        bool, typer.Option("--samples", help="Include every raw sample (chunks, actions).")
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Write the study's format instead (DIR/requests.jsonl + report.json), which "
            "`edgelab runs import DIR` reads back to the same figures.",
        ),
    ] = None,
) -> None:
    """The whole run as JSON (provenance, summary, requests, with --samples the raw samples), or
    with --out in the study's requests.jsonl format for a round trip through `runs import`."""
    from edgelab.metrics.ingest import SAMPLE_COLS
    from edgelab.metrics.results import run_record
    from edgelab.store.db import session_scope
    from edgelab.store.runs import get_run, samples_of

    if out is not None:
        from edgelab.metrics.study import export_study

        try:
            with session_scope(open_engine(), write=False) as s:
                path = export_study(s, get_run(s, run).id, out)
        except ConfigError as err:
            fail_from(err, code=2)
        console.print(f"wrote {escape(str(path))} (+ report.json)", highlight=False)
        return
    with session_scope(open_engine(), write=False) as s:
        r = get_run(s, run)
        rec = run_record(s, r)
        if samples:
            rec["samples"] = [
                {c: getattr(x, c) for c in SAMPLE_COLS if c != "run_id"} for x in samples_of(s, r.id)
            ]
    print_json(rec)


@app.command("import")
def import_(
    path: Annotated[
        Path, typer.Argument(help="The study's requests.jsonl, or the directory holding it (+ report.json).")
    ],
    device: Annotated[
        str | None, typer.Option("--device", help="Device name to record (default: from report.json).")
    ] = None,
    pipeline: Annotated[
        str | None, typer.Option("--pipeline", help="Pipeline to record (default: from report.json).")
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Store a study run (or every run under a results directory) as imported runs, every metric
    recomputed from the raw chunks."""
    from edgelab.errors import InvalidInput
    from edgelab.metrics.results import import_tree, run_record
    from edgelab.store.db import session_scope
    from edgelab.store.runs import get_run

    engine = open_engine()
    try:
        ids = import_tree(engine, path, device=device, pipeline=pipeline)
        with session_scope(engine, write=False) as s:
            recs = [run_record(s, get_run(s, rid)) for rid in ids]
    except InvalidInput as err:  # malformed input is a usage error: every bad line, then exit 2
        fail_lines(err.problems, err.remedy, code=2, more=getattr(err, "more", 0))
    except ConfigError as err:
        fail_from(err, code=2)
    if json_out:
        out = [
            {
                "id": r["id"],
                "source": r["meta"].get("imported_from"),
                "requests": len(r["requests"]),
                "summary": r["summary"],
            }
            for r in recs
        ]
        print_json(out)  # always a list: a results directory may hold many runs
        return
    for r in recs:
        console.print(
            f"imported [bold]{r['id']}[/]: {len(r['requests'])} requests; {escape(_headline(r['summary']))}"
            f"  [dim]{escape(str(r['meta'].get('imported_from')))}[/]"
        )


@app.command("rm")
def rm(
    runs: Annotated[list[str], typer.Argument(help="Run ids (or unique prefixes).")],
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Also a pending/running run, or one cited as matrix "
            "evidence. A run whose deployment is live is always "
            "refused: `edgelab stop` it first.",
        ),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Delete runs with everything recorded for them: requests, raw samples, summaries, telemetry,
    log lines and their deployment records. One transaction: all named runs go, or none."""
    from edgelab.store.db import session_scope
    from edgelab.store.purge import delete_runs

    with session_scope(open_engine()) as s:
        gone = delete_runs(s, runs, force=force)
    if json_out:
        print_json(gone)
        return
    for g in gone:
        console.print(
            f"removed run [bold]{g['id']}[/] ({g['state']}): {g['requests']} requests, "
            f"{g['samples']} samples",
            highlight=False,
        )
