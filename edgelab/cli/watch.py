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
from edgelab.units import GIB, mib, series_caption

if TYPE_CHECKING:
    from rich.panel import Panel
    from rich.text import Text

    from edgelab.views.run import RunView

BARS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 60


def _follower_for(engine, run_id: str):
    """A run nobody follows gets a detached follower (it outlives this view); where none can be
    started, one in this process while it watches (returned, to stop on exit)."""
    from edgelab.deploy.supervise import Follow, FollowerService

    try:
        FollowerService(engine, run_id, Follow.DETACHED).start()
        return None
    except OSError:
        service = FollowerService(engine, run_id, Follow.THREAD)
        return service if service.start() else None


def sparkline(values: list[float], width: int = SPARK_WIDTH) -> str:
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


def _emulated(r: dict) -> str:
    ex = r.get("execution") or {}
    return f" EMULATED ({ex.get('emulator')}, {ex.get('target')})" if ex.get("emulated") else ""


def render(view: RunView) -> Panel:
    """The view as a Rich panel: the read model's figures (edgelab.views.run), nothing computed here."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    m = view.summary or {}
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    a = m.get("audio")
    if a:
        t.add_row(
            "TTFA",
            f"p50 {_f(a['ttfa_ms']['p50'], ' ms')}  p95 {_f(a['ttfa_ms']['p95'], ' ms')}  "
            f"(n={a['ttfa_ms']['count']})",
        )
        t.add_row(
            "RTF", f"streamed p50 {_f(a['rtf_streamed']['p50'])}  total p50 {_f(a['rtf_total']['p50'])}"
        )
        t.add_row(
            "underruns",
            f"{a['underruns_at_ttfa']} in {a['requests_with_underrun']} requests "
            f"(stall p95 {_f(a['stall_ms_at_ttfa']['p95'], ' ms')})",
        )
        t.add_row(
            "chunk gaps",
            f"p50 {_f(a['chunk_gaps_ms']['p50'], ' ms')}  p95 {_f(a['chunk_gaps_ms']['p95'], ' ms')}",
        )
    if view.buffer_ms:
        t.add_row(
            "playout buffer", escape(series_caption("latest request, from TTFA", view.buffer_ms, " ms"))
        )
    act = m.get("action")
    if act:
        t.add_row(
            "action latency",
            f"p50 {_f(act['latency_ms']['p50'], ' ms')}  p95 {_f(act['latency_ms']['p95'], ' ms')}"
            f"  (n={act['latency_ms']['count']})",
        )
        t.add_row("obs age", f"p50 {_f(act['age_ms']['p50'], ' ms')}  p95 {_f(act['age_ms']['p95'], ' ms')}")
        t.add_row(
            "deadline misses", f"{_f(act['deadline_misses'])} (period {_f(act['control_period_ms'], ' ms')})"
        )
    txt = m.get("text")
    if txt:
        t.add_row(
            "TTFT",
            f"p50 {_f(txt['ttft_ms']['p50'], ' ms')}  p95 {_f(txt['ttft_ms']['p95'], ' ms')}  "
            f"(n={txt['ttft_ms']['count']})",
        )
        t.add_row(
            "inter-token",
            f"p50 {_f(txt['itl_ms_p50']['p50'], ' ms')}  p95 {_f(txt['itl_ms_p50']['p95'], ' ms')}"
            " (per-request p50s)",
        )
        t.add_row(
            "decode",
            f"p50 {_f(txt['decode_tok_s']['p50'], ' tok/s')}  p95 {_f(txt['decode_tok_s']['p95'], ' tok/s')}",
        )
    cod = m.get("codec")
    if cod:
        t.add_row(
            "codec frames",
            f"first p50 {_f(cod['first_frame_ms']['p50'], ' ms')}  "
            f"rate p50 {_f(cod['frames_per_s']['p50'], ' frames/s')}",
        )
    for name, st in (m.get("stages_ms") or {}).items():
        t.add_row(f"stage {escape(name)}", f"p50 {_f(st['p50'], ' ms')}  (n={st['count']})")
    res = m.get("resources")
    if res:
        hot = max((res["max_temp_c"] or {}).values(), default=None)
        rss = res["peak_rss_bytes"]
        t.add_row("peaks", f"temp max {_f(hot, '°C')}  RSS {mib(rss, 1)}  throttled {_f(res['throttled'])}")
    now = view.latest
    if now and now.temps_c:
        hot = sorted(now.temps_c.items(), key=lambda kv: -kv[1])[:4]
        t.add_row("temperature", escape("  ".join(f"{k} {v:.1f}°C" for k, v in hot)))
    else:
        t.add_row("temperature", "-")
    if now and now.power_w:
        total = sum(now.power_w.values())
        t.add_row(
            "power",
            escape(
                f"{total:.2f} W over {len(now.power_w)} rail(s)  "
                + "  ".join(
                    f"{k} {v:.2f}W" for k, v in sorted(now.power_w.items(), key=lambda kv: -kv[1])[:3]
                )
            ),
        )
    if now and now.clocks_mhz:
        t.add_row(
            "clocks", escape("  ".join(f"{k} {v:.0f} MHz" for k, v in sorted(now.clocks_mhz.items())[:4]))
        )
    if now and now.mem_available_bytes is not None:
        t.add_row("memory", f"{now.mem_available_bytes / GIB:.2f} GiB available")
    if now and now.source:
        t.add_row("telemetry", escape(now.source) + (" (virtual shim)" if now.virtual else ""))
    req = m.get("requests") or {}
    t.add_row(
        "requests",
        f"{req.get('total', 0)} ({', '.join(f'{k} {v}' for k, v in (req.get('by_phase') or {}).items())})",
    )
    rep = m.get("reported")
    for band, figs in ((rep or {}).get("bands") or {}).items():  # a one-shot program's own figures
        shown = [
            f"{k} p50 {_f(v['p50'])}"
            for k, v in figs.items()
            if isinstance(v, dict) and k in ("decode_tok_s", "prompt_tok_s", "tok_s", "prompt_ms", "load_ms")
        ]
        t.add_row(f"reported {escape(band)}", escape("  ".join(shown) + f"  (n={figs['requests']})"))
    if rep:
        t.add_row("reported by", escape(str(rep.get("source"))))
    r = view.run
    caption, series, what = _series(view)
    spark = Text(
        sparkline(series)
        or (
            "(the runtime's own figures below)"
            if rep
            else f"(no {what} yet)"
            if what
            else "(nothing measured yet)"
        ),
        style="cyan",
    )
    title = escape(
        f"{r['id']}  {r['pipeline'] or '-'} on {r['device'] or '-'}"
        f"{' (virtual)' if r['virtual'] else ''}{_emulated(r)}  [{r['state']}]"
    )
    source = view.summary_source if view.summary_source != "none" else "no"
    return Panel(Group(caption, spark, t), title=title, subtitle=f"{source} summary")


def _series(view: RunView) -> tuple[Text, list[float], str | None]:
    """The sparkline of the run's kind: audio chunk gaps, text inter-token gaps, action latency."""
    from rich.text import Text

    if view.kind == "action":
        lat = view.latency_ms
        return (
            Text(series_caption("inference latency", lat, " ms") if lat else "inference latency "),
            lat,
            "chunks",
        )
    if view.kind in ("audio", "text"):
        gaps = view.chunk_gaps_ms
        cap = series_caption(view.gap_label, gaps, " ms") if gaps else f"{view.gap_kind} gaps "
        return Text(cap), gaps, "tokens" if view.kind == "text" else "chunks"
    return Text(""), [], None


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


def watch(
    run: Annotated[str, typer.Argument(help="Run id (or a unique prefix).")],
    interval: Annotated[float, typer.Option("--interval", help="Seconds between refreshes.")] = 0.25,
    once: Annotated[bool, typer.Option("--once", help="Print one frame and exit.")] = False,
    for_: Annotated[
        str | None,
        typer.Option("--for", help="Watch this long, then exit 0 and leave the run running (e.g. 5s, 2m)."),
    ] = None,
) -> None:
    """Live view of a run (works from any process that reaches the database)."""
    from rich.live import Live

    from edgelab.store.db import get_engine
    from edgelab.views.run import RunReader

    try:
        deadline = None if for_ is None else time.monotonic() + _duration_s(for_)
        engine = get_engine(state.db)
        reader = RunReader(engine, run)
        view = reader.poll()
    except ConfigError as err:  # bad input here is a usage error: exit 2 (root handler: 1)
        fail_from(err, code=2)
    if once:
        console.print(render(view))
        return
    follower = None if view.final else _follower_for(engine, reader.run_id)
    with Live(render(view), console=console, refresh_per_second=max(1, int(1 / max(interval, 0.05)))) as live:
        try:
            while not view.final and (deadline is None or time.monotonic() < deadline):
                time.sleep(
                    interval if deadline is None else max(0.0, min(interval, deadline - time.monotonic()))
                )
                view = reader.poll()
                live.update(render(view))
        except KeyboardInterrupt:
            pass
        finally:
            if follower is not None:
                follower.wait(5) if view.final else follower.stop()


def register(app: typer.Typer) -> None:
    app.command("watch")(watch)
