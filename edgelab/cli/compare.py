"""`edgelab runs compare` and `edgelab runs baseline ...`: thin over edgelab.metrics.runsets."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from edgelab.cli.common import JsonOpt, console, escape, fail, fail_from, open_engine, print_json
from edgelab.errors import ConfigError

baseline_app = typer.Typer(
    help="Named baselines: the runs later runs of a device and pipeline are compared with.",
    no_args_is_help=True,
)

VERDICT_STYLE = {"faster": "green", "slower": "red", "no difference": "white", "unknown": "dim"}


def _num(v: float | None, unit: str | None = None) -> str:
    if v is None:
        return "-"
    text = f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"
    return f"{text} {unit}" if unit else text


def compare(
    a: Annotated[
        str,
        typer.Argument(
            help="Side A, the reference: a run id (or r1,r2,...), baseline:NAME, tag:NAME or last:N. "
            "With --last N and no B, this is B.",
        ),
    ],
    b: Annotated[str | None, typer.Argument(help="Side B, the one judged against A (same forms).")] = None,
    last: Annotated[
        int | None,
        typer.Option("--last", help="A = the newest N finished runs of B's device and pipeline before B."),
    ] = None,
    device: Annotated[
        str | None, typer.Option("--device", help="Narrow last:N / a baseline to this device.")
    ] = None,
    pipeline: Annotated[
        str | None, typer.Option("--pipeline", help="Narrow last:N / a baseline to this pipeline.")
    ] = None,
    confidence: Annotated[
        float, typer.Option("--confidence", help="Confidence of the interval and verdict (0.5-0.999).")
    ] = 0.99,
    metric: Annotated[
        list[str] | None,
        typer.Option("--metric", "-m", help="Only this metric (repeatable): ttfa, decode_tok_s, ..."),
    ] = None,
    seed: Annotated[
        int, typer.Option("--seed", help="Bootstrap seed (the same seed gives the same interval).")
    ] = 0,
    resamples: Annotated[int, typer.Option("--resamples", help="Bootstrap resamples.")] = 4000,
    allow: Annotated[
        bool,
        typer.Option("--allow", help="Compare even across devices, pipelines, protocols or virtual/real."),
    ] = False,
    plot: Annotated[
        Path | None,
        typer.Option("--plot", help="Draw both sides' distributions to this file (.png, .svg or .html)."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Compare two runs or sets of runs metric by metric: both sides' p50/p95 with counts, the ratio
    B/A of medians with a bootstrap interval over the raw per-request values, and a verdict (faster,
    slower, no difference) at the stated confidence. Refuses what is not comparable (--allow)."""
    from edgelab.metrics.runsets import compare_refs
    from edgelab.store.db import session_scope

    if not 0.5 <= confidence < 1.0:
        fail(f"--confidence {confidence} is outside [0.5, 1)", "e.g. --confidence 0.95", code=2)
    if resamples < 200:
        fail("--resamples must be at least 200", code=2)
    a_ref, b_ref = (a, b) if b is not None else (None, a)
    if a_ref is None and not last:
        fail(
            "compare needs two sides", "edgelab runs compare A B, or edgelab runs compare B --last N", code=2
        )
    try:
        with session_scope(open_engine(), write=False) as s:
            comp = compare_refs(
                s,
                a_ref,
                b_ref,
                last=last,
                device=device,
                pipeline=pipeline,
                allow=allow,
                confidence=confidence,
                seed=seed,
                resamples=resamples,
                only=metric,
            )
            out = comp.to_dict()
    except ConfigError as err:
        fail_from(err, code=2 if "not comparable" not in str(err) else 1)
    if plot is not None:
        from edgelab.views.plots import plot_comparison

        try:
            out["plot"] = str(plot_comparison(comp, plot))
        except ConfigError as err:
            fail_from(err, code=2)
    if json_out:
        print_json(out)
        return
    render(out)


def render(out: dict[str, Any]) -> None:
    from rich.table import Table

    def side(d: dict[str, Any]) -> str:
        virt = " (virtual)" if d["virtual"] is True else ""
        return escape(f"{d['label']}: {d['pipeline']} on {d['device']}{virt}, {d['protocol']}")

    console.print(f"[bold]A[/] {side(out['a'])}", highlight=False)
    console.print(f"[bold]B[/] {side(out['b'])}", highlight=False)
    if out["refused"]:
        console.print(f"[yellow]compared anyway (--allow): {escape('; '.join(out['refused']))}[/]")
    table = Table(box=None, header_style="bold")
    for col in (
        "metric",
        "A p50",
        "A p95",
        "n",
        "B p50",
        "B p95",
        "n",
        "B/A",
        f"{out['confidence']:.0%} interval",
        "verdict",
    ):
        table.add_column(col, justify="right" if col not in ("metric", "verdict") else "left")
    for m in out["metrics"]:
        unit = m["unit"]
        iv = m["interval"]
        verdict = m["verdict"]
        style = VERDICT_STYLE.get(verdict, "white")
        table.add_row(
            escape(m["label"]) + ("" if m["better"] == "lower" else " (higher better)"),
            _num(m["a"]["p50"], unit),
            _num(m["a"]["p95"], unit),
            str(m["a"]["count"]),
            _num(m["b"]["p50"], unit),
            _num(m["b"]["p95"], unit),
            str(m["b"]["count"]),
            f"{m['ratio']:.3f}" if m["ratio"] is not None else "-",
            f"{iv[0]:.3f}-{iv[1]:.3f}" if iv else "-",
            f"[{style}]{verdict}[/]" + (f" [dim]({escape(m['why'])})[/]" if m["why"] else ""),
        )
    console.print(table if out["metrics"] else "[dim]no metric both sides measured[/]")
    if out["provenance_differs"]:
        console.print("[bold]provenance that differs[/]")
        for d in out["provenance_differs"]:
            console.print(
                f"  {escape(d['field'])}: A {escape(' | '.join(d['a']))}  B {escape(' | '.join(d['b']))}",
                highlight=False,
            )
    else:
        console.print("[dim]provenance: no field differs[/]")
    if out.get("plot"):
        console.print(f"plot: {escape(out['plot'])}", highlight=False)


# ------------------------------------------------------------------------ baselines


@baseline_app.command("set")
def baseline_set(
    name: Annotated[str, typer.Argument(help="Baseline name (e.g. nightly).")],
    runs: Annotated[list[str], typer.Argument(help="Run ids (or unique prefixes); one device and pipeline.")],
    note: Annotated[str | None, typer.Option("--note", help="Why this baseline (kept with it).")] = None,
    json_out: JsonOpt = False,
) -> None:
    """Make RUNS the baseline NAME of their device, pipeline, strategy and runtime (the previous
    one stays as history, with who set it and when)."""
    from edgelab.lease.owner import whoami
    from edgelab.metrics.baseline import set_baseline
    from edgelab.store.db import session_scope

    try:
        with session_scope(open_engine()) as s:
            row = set_baseline(s, name, runs, set_by=whoami().label(), note=note).to_dict()
    except ConfigError as err:
        fail_from(err, code=2)
    if json_out:
        print_json(row)
        return
    console.print(
        f"baseline [bold]{escape(row['name'])}[/] for {escape(_key(row))}: {', '.join(row['runs'])} "
        f"(set by {escape(row['set_by'])})",
        highlight=False,
    )


def _key(row: dict[str, Any]) -> str:
    return f"{row['pipeline']} on {row['device']} ({row['strategy'] or '-'}, {row['runtime'] or '-'})"


@baseline_app.command("ls")
def baseline_ls(
    name: Annotated[str | None, typer.Argument(help="Only this name.")] = None, json_out: JsonOpt = False
) -> None:
    """Every current baseline: name, device, pipeline, strategy, runtime, runs, who set it and when."""
    from rich.table import Table

    from edgelab.store.baselines import current_baselines
    from edgelab.store.db import session_scope

    with session_scope(open_engine(), write=False) as s:
        rows = [b.to_dict() for b in current_baselines(s, name)]
    if json_out:
        print_json(rows)
        return
    table = Table(box=None, header_style="bold")
    for col in ("name", "device", "pipeline", "strategy", "runtime", "runs", "set by", "set at"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            escape(r["name"]),
            escape(r["device"]),
            escape(r["pipeline"]),
            r["strategy"] or "-",
            escape(r["runtime"] or "-"),
            ", ".join(r["runs"]),
            escape(r["set_by"]),
            r["set_at"][:16].replace("T", " "),
        )
    console.print(table if rows else "[dim]no baselines yet (edgelab runs baseline set NAME RUN...)[/]")


@baseline_app.command("show")
def baseline_show(
    name: Annotated[str, typer.Argument(help="Baseline name.")],
    device: Annotated[str | None, typer.Option("--device", help="Its device, when several are set.")] = None,
    pipeline: Annotated[str | None, typer.Option("--pipeline", help="Its pipeline, when several.")] = None,
    json_out: JsonOpt = False,
) -> None:
    """One baseline: its runs with their headline medians, and its history (who moved it, when)."""
    from edgelab.metrics.baseline import describe
    from edgelab.store.db import session_scope

    try:
        with session_scope(open_engine(), write=False) as s:
            out = describe(s, name, device=device, pipeline=pipeline)
    except ConfigError as err:
        fail_from(err, code=2)
    if json_out:
        print_json(out)
        return
    cur = out["baseline"]
    console.print(f"baseline [bold]{escape(cur['name'])}[/] for {escape(_key(cur))}", highlight=False)
    console.print(
        f"set by {escape(cur['set_by'])} at {cur['set_at'][:19]}"
        + (f": {escape(cur['note'])}" if cur["note"] else "")
    )
    for r in out["runs"]:
        med = ", ".join(f"{k} {_num(v)}" for k, v in r["medians"].items())
        console.print(f"  {r['id']}  {r['created_at'][:16]}  {escape(med or '-')}", highlight=False)
    if len(out["history"]) > 1:
        console.print("[bold]history[/]")
        for h in out["history"]:
            console.print(
                f"  {h['set_at'][:19]}  {escape(h['set_by'])}  {', '.join(h['runs'])}", highlight=False
            )


def register(runs_app: typer.Typer) -> None:
    runs_app.command("compare")(compare)
    runs_app.add_typer(baseline_app, name="baseline")
