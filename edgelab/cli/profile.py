"""`edgelab profile DEVICE`: the deploy profile derived from the latest probe, thin over edgelab.profile."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from edgelab.cli.common import JsonOpt, console, escape, fail, fail_from, open_engine, print_json
from edgelab.cli.probe import latest_snap, snap_meta
from edgelab.errors import ConfigError


def profile(
    device: Annotated[str, typer.Argument(help="Device name.")],
    pipeline: Annotated[
        str | None, typer.Option("--pipeline", help="Pipeline to plan for (e.g. qwen3-tts).")
    ] = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="Every rule that fired, with its inputs and why.")
    ] = False,
    from_sweep: Annotated[
        str | None,
        typer.Option(
            "--from-sweep",
            help="Take the best point of this sweep (a run of `bench --sweep`) back: its threads and "
            "chunk schedule replace the derived ones, the rule says why.",
        ),
    ] = None,
    metric: Annotated[
        str | None,
        typer.Option("--metric", help="--from-sweep: best by this metric (default: the headline)."),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """The deploy profile of DEVICE, derived from its latest probe snapshot (never hand-typed)."""
    from edgelab.profile import profile_from_facts

    snap = latest_snap(device)
    prof = profile_from_facts(snap.facts or {}, pipeline)
    if from_sweep is not None:
        prof = _take_sweep(prof, device, pipeline, from_sweep, metric)
    if json_out:
        print_json({"device": device, "snapshot": snap_meta(snap), "profile": prof})
        return
    _render_profile(device, snap, prof, explain)


def _take_sweep(
    prof: dict[str, Any], device: str, pipeline: str | None, ref: str, metric: str | None
) -> dict:
    """The profile with the sweep's best point applied (threads, chunk schedule) and a rule saying so."""
    from edgelab.bench.sweep import best_from_sweep
    from edgelab.store.db import session_scope

    try:
        with session_scope(open_engine(), write=False) as s:
            got = best_from_sweep(s, ref, metric=metric)
    except ConfigError as err:
        fail_from(err, code=2)
    if got["device"] != device or (pipeline and got["pipeline"] != pipeline):
        fail(
            f"sweep {got['sweep']} ran {got['pipeline']} on {got['device']}, not on {device}",
            "take a sweep of this device (and pipeline)",
            code=2,
        )
    best = got["best"]
    cfg = dict(best["config"])
    if "threads" in cfg:
        prof["threads"] = int(cfg["threads"])
    for pipe in prof.get("pipelines") or []:
        if "schedule" in cfg and pipe.get("pipeline") == got["pipeline"] and pipe.get("chunk_schedule"):
            pipe["chunk_schedule"] = {
                **pipe["chunk_schedule"],
                "edge": [int(x) for x in cfg["schedule"].split(",")],
            }
    value = best["medians"][got["metric"]]
    prof.setdefault("rules", []).append(
        {
            "name": "from_sweep",
            "inputs": {
                "sweep": got["sweep"],
                "points": [{p["label"]: p["medians"].get(got["metric"])} for p in got["points"]],
            },
            "result": cfg,
            "why": f"best {got['metric']} median ({got['better']} is better) of sweep {got['sweep']}: "
            f"{best['label']} at {value:.4g} (run {best['run']})"
            + (" - measured on a VIRTUAL device" if got["virtual"] else ""),
        }
    )
    prof["from_sweep"] = {
        "sweep": got["sweep"],
        "run": best["run"],
        "point": best["label"],
        "metric": got["metric"],
    }
    return prof


def _render_profile(device: str, snap, prof: dict[str, Any], explain: bool) -> None:
    from rich.table import Table

    virtual = "  [dim]VIRTUAL[/]" if snap.virtual else ""
    console.rule(
        f"[bold]{escape(device)}[/]  [dim]profile from the probe of "
        f"{snap.taken_at.strftime('%Y-%m-%d %H:%M UTC')}[/]{virtual}",
        align="left",
    )
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column("key", style="bold")
    table.add_column("value", overflow="fold")
    for key, value in prof.items():
        if key in ("pipelines", "rules", "classification"):
            continue
        table.add_row(escape(str(key)), escape(_fmt_nested(value)))
    console.print(table)
    for pipe in prof.get("pipelines") or []:
        st = Table(
            title=f"pipeline {pipe.get('pipeline')}: strategies",
            title_justify="left",
            show_header=True,
            header_style="bold",
            box=None,
        )
        for col in ("strategy", "eligible", "why"):
            st.add_column(col, overflow="fold")
        for sd in pipe.get("strategies") or []:
            ok = sd.get("eligible")
            why = str(sd.get("reason") or "") + (f" [{sd['code']}]" if sd.get("code") and not ok else "")
            st.add_row(
                escape(str(sd.get("strategy"))), "[green]yes[/]" if ok else "[red]refused[/]", escape(why)
            )
        console.print(st)
    if explain:
        rules = prof.get("rules") or []
        rt = Table(
            title="rules that fired", title_justify="left", show_header=True, header_style="bold", box=None
        )
        for col in ("rule", "inputs", "result", "why"):
            rt.add_column(col, overflow="fold")
        for r in rules:
            rt.add_row(
                escape(str(r.get("name"))),
                escape(_fmt_nested(r.get("inputs") or {})),
                escape(_fmt_nested(r.get("result"))),
                escape(str(r.get("why") or "")),
            )
        console.print(rt)


def _fmt_nested(v: Any) -> str:
    if isinstance(v, dict):
        return "; ".join(f"{k}: {_fmt_nested(x)}" for k, x in v.items())
    if isinstance(v, list):
        return ", ".join(_fmt_nested(x) for x in v)
    return str(v)


def register(app: typer.Typer) -> None:
    app.command("profile")(profile)
