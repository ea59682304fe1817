"""`edgelab watch RUN`: a Rich live view of one run, read from the database (works from any process).

Shows the chunk-gap sparkline, TTFA, RTF, underruns, action p50/p95 and temperature; it
polls the run's live summary and newest raw samples, so the run may be driven by another
process or host.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from edgelab.cli.common import console, escape, fail_from, state
from edgelab.errors import ConfigError

if TYPE_CHECKING:
    from rich.panel import Panel

BARS = "▁▂▃▄▅▆▇█"
FINAL = {"finished", "failed", "stopped", "device-lost"}


def sparkline(values: list[float], width: int = 60) -> str:
    vals = values[-width:]
    if not vals:
        return ""
    lo, hi = min(vals), max(vals)
    if hi <= lo:
        return BARS[0] * len(vals)
    return "".join(BARS[min(len(BARS) - 1, int((v - lo) / (hi - lo) * (len(BARS) - 1) + 0.5))] for v in vals)


def _f(v: Any, unit: str = "") -> str:
    if v is None:
        return "-"
    return f"{v:.1f}{unit}" if isinstance(v, float) else f"{v}{unit}"


def snapshot(engine, ref: str, *, gaps: int = 60) -> dict[str, Any]:
    """What the view shows, as data: run, live/final summary, recent chunk gaps, latest temperatures."""
    from sqlmodel import select

    from edgelab.store.db import session_scope
    from edgelab.store.runs import RunSample, get_run, get_summary, telemetry_of

    with session_scope(engine, write=False) as s:
        run = get_run(s, ref)
        summ = get_summary(s, run.id, "final") or get_summary(s, run.id, "live")
        rows = s.exec(select(RunSample.request, RunSample.t_ms).where(
            RunSample.run_id == run.id, RunSample.kind == "audio", RunSample.n > 0)
            .order_by(RunSample.id.desc()).limit(gaps + 1)).all()
        tel = telemetry_of(s, run_id=run.id, limit=1) or (
            telemetry_of(s, device=run.device_name, limit=1) if run.device_name else [])
        gap_kind = "chunk"
        if not rows:  # a text run: the gaps between streamed tokens instead
            rows = s.exec(select(RunSample.request, RunSample.t_ms).where(
                RunSample.run_id == run.id, RunSample.kind == "text")
                .order_by(RunSample.id.desc()).limit(gaps + 1)).all()
            gap_kind = "inter-token" if rows else gap_kind
        rows = list(reversed(rows))
        recent = [b[1] - a[1] for a, b in zip(rows, rows[1:], strict=False) if a[0] == b[0]]
        return {"id": run.id, "pipeline": run.pipeline, "device": run.device_name, "virtual": run.virtual,
                "state": run.state, "summary": summ.metrics if summ else None,
                "summary_kind": summ.kind if summ else None, "recent_gaps_ms": recent, "gap_kind": gap_kind,
                "temps_c": dict(tel[-1].temps_c) if tel else {},
                "power_w": dict(tel[-1].power_w) if tel else {}, "clocks_mhz": dict(tel[-1].clocks_mhz) if tel else {},
                "mem_available_bytes": tel[-1].mem_available_bytes if tel else None,
                "telemetry_source": tel[-1].source if tel else None,
                "telemetry_virtual": bool(tel[-1].virtual) if tel else None}


def render(snap: dict[str, Any]) -> Panel:
    from rich.console import Group
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    m = snap["summary"] or {}
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    a = m.get("audio")
    if a:
        t.add_row("TTFA", f"p50 {_f(a['ttfa_ms']['p50'], ' ms')}  p95 {_f(a['ttfa_ms']['p95'], ' ms')}  "
                          f"(n={a['ttfa_ms']['count']})")
        t.add_row("RTF", f"streamed p50 {_f(a['rtf_streamed']['p50'])}  total p50 {_f(a['rtf_total']['p50'])}")
        t.add_row("underruns", f"{a['underruns_at_ttfa']} in {a['requests_with_underrun']} requests "
                               f"(stall p95 {_f(a['stall_ms_at_ttfa']['p95'], ' ms')})")
        t.add_row("chunk gaps", f"p50 {_f(a['chunk_gaps_ms']['p50'], ' ms')}  p95 {_f(a['chunk_gaps_ms']['p95'], ' ms')}")
    act = m.get("action")
    if act:
        t.add_row("action latency", f"p50 {_f(act['latency_ms']['p50'], ' ms')}  p95 {_f(act['latency_ms']['p95'], ' ms')}"
                                    f"  (n={act['latency_ms']['count']})")
        t.add_row("obs age", f"p50 {_f(act['age_ms']['p50'], ' ms')}  p95 {_f(act['age_ms']['p95'], ' ms')}")
        t.add_row("deadline misses", f"{_f(act['deadline_misses'])} (period {_f(act['control_period_ms'], ' ms')})")
    txt = m.get("text")
    if txt:
        t.add_row("TTFT", f"p50 {_f(txt['ttft_ms']['p50'], ' ms')}  p95 {_f(txt['ttft_ms']['p95'], ' ms')}  "
                          f"(n={txt['ttft_ms']['count']})")
        t.add_row("inter-token", f"p50 {_f(txt['itl_ms_p50']['p50'], ' ms')}  p95 {_f(txt['itl_ms_p50']['p95'], ' ms')}"
                                 " (per-request p50s)")
        t.add_row("decode", f"p50 {_f(txt['decode_tok_s']['p50'], ' tok/s')}  "
                            f"p95 {_f(txt['decode_tok_s']['p95'], ' tok/s')}")
    cod = m.get("codec")
    if cod:
        t.add_row("codec frames", f"first p50 {_f(cod['first_frame_ms']['p50'], ' ms')}  "
                                  f"rate p50 {_f(cod['frames_per_s']['p50'], ' frames/s')}")
    for name, st in (m.get("stages_ms") or {}).items():
        t.add_row(f"stage {escape(name)}", f"p50 {_f(st['p50'], ' ms')}  (n={st['count']})")
    res = m.get("resources")
    if res:
        hot = max((res["max_temp_c"] or {}).values(), default=None)
        rss = res["peak_rss_bytes"]
        t.add_row("peaks", f"temp max {_f(hot, '°C')}  RSS {_f(rss / 2**20 if rss is not None else None, ' MiB')}  "
                           f"throttled {_f(res['throttled'])}")
    if snap["temps_c"]:
        hot = sorted(snap["temps_c"].items(), key=lambda kv: -kv[1])[:4]
        t.add_row("temperature", escape("  ".join(f"{k} {v:.1f}°C" for k, v in hot)))
    else:
        t.add_row("temperature", "-")
    if snap.get("power_w"):
        total = sum(snap["power_w"].values())
        t.add_row("power", escape(f"{total:.2f} W over {len(snap['power_w'])} rail(s)  " + "  ".join(
            f"{k} {v:.2f}W" for k, v in sorted(snap["power_w"].items(), key=lambda kv: -kv[1])[:3])))
    if snap.get("clocks_mhz"):
        t.add_row("clocks", escape("  ".join(f"{k} {v:.0f} MHz" for k, v in sorted(snap["clocks_mhz"].items())[:4])))
    if snap.get("mem_available_bytes") is not None:
        t.add_row("memory", f"{snap['mem_available_bytes'] / 2**30:.2f} GiB available")
    if snap.get("telemetry_source"):
        t.add_row("telemetry", escape(snap["telemetry_source"]) + (" (virtual shim)" if snap["telemetry_virtual"] else ""))
    req = m.get("requests") or {}
    t.add_row("requests", f"{req.get('total', 0)} ({', '.join(f'{k} {v}' for k, v in (req.get('by_phase') or {}).items())})")
    gap_kind = snap.get("gap_kind", "chunk")
    spark = Text(sparkline(snap["recent_gaps_ms"]) or f"(no {'tokens' if gap_kind != 'chunk' else 'chunks'} yet)",
                 style="cyan")
    title = escape(f"{snap['id']}  {snap['pipeline'] or '-'} on {snap['device'] or '-'}"
                   f"{' (virtual)' if snap['virtual'] else ''}  [{snap['state']}]")
    return Panel(Group(Text(f"{gap_kind} gaps "), spark, t), title=title,
                 subtitle=f"{snap['summary_kind'] or 'no'} summary")


def _duration_s(text: str) -> float:
    """``5``, ``5s``, ``2m``, ``1h`` -> seconds; anything else is a usage error."""
    units = {"s": 1, "m": 60, "h": 3600}
    raw = text.strip().lower()
    scale = units.get(raw[-1:], None)
    number = raw[:-1] if scale else raw
    try:
        value = float(number) * (scale or 1)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ConfigError(f"--for {text!r} is not a duration", remedy="give seconds or a unit: 5s, 2m, 1h")
    return value


def register(app: typer.Typer) -> None:
    @app.command("watch")
    def watch(
        run: Annotated[str, typer.Argument(help="Run id (or a unique prefix).")],
        interval: Annotated[float, typer.Option("--interval", help="Seconds between refreshes.")] = 0.25,
        once: Annotated[bool, typer.Option("--once", help="Print one frame and exit.")] = False,
        for_: Annotated[str | None, typer.Option("--for", help="Watch this long, then exit 0 and leave the run "
                                                 "running (e.g. 5s, 2m).")] = None,
    ) -> None:
        """Live view of a run (works from any process that reaches the database)."""
        from rich.live import Live

        from edgelab.store.db import get_engine

        try:
            deadline = None if for_ is None else time.monotonic() + _duration_s(for_)
            engine = get_engine(state.db)
            snap = snapshot(engine, run)
        except ConfigError as err:  # bad input here is a usage error: exit 2 (root handler: 1)
            fail_from(err, code=2)
        if once:
            console.print(render(snap))
            return
        from edgelab.deploy.follow import ensure_follower

        follower = ensure_follower(engine, snap["id"]) if snap["state"] not in FINAL else None  # none alive: ingest here
        with Live(render(snap), console=console, refresh_per_second=max(1, int(1 / max(interval, 0.05)))) as live:
            try:
                while snap["state"] not in FINAL and (deadline is None or time.monotonic() < deadline):
                    time.sleep(interval if deadline is None else max(0.0, min(interval, deadline - time.monotonic())))
                    snap = snapshot(engine, run)
                    live.update(render(snap))
            except KeyboardInterrupt:
                pass
            finally:
                if follower is not None:
                    follower.join(5) if snap["state"] in FINAL else follower.stop()
