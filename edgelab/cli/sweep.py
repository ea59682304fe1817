"""`edgelab bench ... --ab OTHER` / `--sweep KEY=V1,V2`: thin over edgelab.bench.sweep."""

from __future__ import annotations

from typing import Any

from edgelab.cli.common import console, err_console, escape, fail, fail_from, print_json
from edgelab.errors import ConfigError
from edgelab.states import RunState

HEADLINE = ("ttfa", "rtf_streamed", "ttft", "decode_tok_s", "itl", "action_latency", "request_wall")


def run(
    engine,
    base,
    *,
    ab: str | None,
    sweep: list[str] | None,
    block: int,
    order: str,
    confidence: float,
    tags: list[str] | None,
    lease: str | None,
    json_out: bool,
) -> None:
    from edgelab.bench.sweep import Point, parse_settings, parse_sweep, run_points

    try:
        if ab is not None:
            other = parse_settings(ab)
            points = [Point("A", {}), Point("B", other)]
            kind = "ab"
        else:
            points = parse_sweep(sweep or [])
            kind = "sweep"
    except ConfigError as err:
        fail_from(err, code=2)

    def progress(pr, res, rnd, rounds) -> None:
        if not json_out:
            err_console.print(
                f"[dim]round {rnd + 1}/{rounds}: {escape(pr.point.label)} block {len(pr.blocks)} "
                f"({res.run_id} -> {pr.run_id}) {res.state}[/]",
                highlight=False,
            )

    if not json_out:
        what = " vs ".join(p.label if p.config else "A (as given)" for p in points)
        err_console.print(
            f"[dim]{kind} {escape(base.pipeline)} on {escape(base.device)}: {escape(what)}; "
            f"{base.requests} measured per point in blocks of {block}, {order}, "
            f"{base.warmup} warm-up per block[/]",
            highlight=False,
        )
    try:
        res = run_points(
            engine,
            base,
            points,
            kind=kind,
            block=block,
            order=order,
            lease_id=lease,
            on_block=progress,
            confidence=confidence,
            tags=tags,
        )
    except ConfigError as err:
        fail_from(err, code=2)
    except KeyboardInterrupt:
        fail("interrupted: the workload is stopped; the points' runs keep what was measured", code=130)
    out = res.to_dict()
    if json_out:
        print_json(out)
        return
    render(out)


def _num(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3g}" if abs(v) < 100 else f"{v:.0f}"


def render(out: dict[str, Any]) -> None:
    from rich.table import Table

    from edgelab.metrics import compare as cmp

    virt = "  [yellow]VIRTUAL device: machinery only, not a device figure[/]" if out["virtual"] else ""
    console.print(
        f"{out['kind']} [bold]{out['sweep']}[/]: {len(out['points'])} points, {out['rounds']} rounds of "
        f"{out['block']} ({out['order']}){virt}"
    )
    names = [n for n in HEADLINE if any(p["medians"].get(n) is not None for p in out["points"])]
    names += sorted({n for p in out["points"] for n in p["medians"] if n.startswith("tok_s_")})
    table = Table(box=None, header_style="bold")
    table.add_column("point")
    table.add_column("run")
    for n in names:
        m = cmp.metric(n)
        table.add_column(f"{m.label} median" + (f" {m.unit}" if m.unit else ""), justify="right")
    for p in out["points"]:
        cells = []
        for n in names:
            text = _num(p["medians"].get(n))
            cells.append(
                f"[bold green]{text}[/]"
                if out["best"].get(n) == p["label"] and len(out["points"]) > 1
                else text
            )
        table.add_row(
            escape(p["label"] or "A"),
            p["run"] + ("" if p["state"] == RunState.FINISHED else f" ({p['state']})"),
            *cells,
        )
    console.print(table)
    if out["best"]:
        console.print(
            "best: "
            + escape(
                ", ".join(f"{cmp.metric(k).label} -> {v}" for k, v in out["best"].items() if k in names)
            ),
            highlight=False,
        )
    if out.get("comparison"):
        from edgelab.cli.compare import render as render_compare

        console.print()
        render_compare(out["comparison"])
