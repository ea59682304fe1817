"""`edgelab probe`, `edgelab facts DEVICE`: thin over edgelab.probe."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from edgelab.cli.common import (
    JsonOpt,
    console,
    emit_error,
    err_console,
    escape,
    fail,
    open_engine,
    print_json,
)

if TYPE_CHECKING:
    import click

# ---------------------------------------------------------------- edgelab probe


def _outcome_dict(o) -> dict[str, Any]:
    from edgelab.probe.summary import summarize

    snap = o.snapshot
    return {
        "name": o.name,
        "ok": o.ok,
        "error": o.error,
        "remedy": o.remedy,
        "duration_s": round(o.duration_s, 3),
        "snapshot_id": snap.id if snap else None,
        "taken_at": snap.taken_at.isoformat() if snap else None,
        "class": snap.device_class if snap else None,
        "catalog_entry": snap.catalog_entry if snap else None,
        "facts_hash": snap.facts_hash if snap else None,
        "virtual": snap.virtual if snap else None,
        "summary": summarize(snap.facts if snap else None),
        "warnings": list(snap.warnings) if snap else [],
    }


def probe(
    devices: Annotated[
        list[str] | None, typer.Argument(help="Device names (see `edgelab device ls`).")
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Probe every device of the inventory.")] = False,
    json_out: JsonOpt = False,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds per device; the remote side is killed past it.")
    ] = 60.0,
    parallel: Annotated[int, typer.Option("--parallel", min=1, help="Devices probed at once.")] = 16,
) -> None:
    """Probe devices into facts (one batched exec each), classify them, store a snapshot."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from edgelab.inventory.probe import probe_devices
    from edgelab.probe.summary import summarize

    if not devices and not all_:
        fail(
            "name the devices to probe, or give --all",
            "e.g. `edgelab probe orin-agx s25` or `edgelab probe --all`",
            2,
        )
    if devices and all_:
        fail("give device names or --all, not both", code=2)
    engine = open_engine()
    progress = Progress(
        TextColumn("probing"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=err_console,
        transient=True,
        disable=json_out or not err_console.is_terminal,
    )
    with progress:
        task = progress.add_task("", total=None)

        def step(outcome) -> None:
            mark = "ok" if outcome.ok else "FAILED"
            progress.update(task, advance=1, description=f"{outcome.name} {mark}")

        if all_:
            from edgelab.store.db import session_scope
            from edgelab.store.devices import list_devices

            with session_scope(engine, write=False) as s:
                devices = [d.name for d in list_devices(s)]
            if not devices:
                fail("the inventory is empty", "add devices with `edgelab device add` or `edgelab sim up`")
        progress.update(task, total=len(devices))
        outcomes = probe_devices(engine, devices, parallel=parallel, timeout=timeout, on_progress=step)
    failed = [o for o in outcomes if not o.ok]
    if json_out:
        print_json([_outcome_dict(o) for o in outcomes])
        raise typer.Exit(1 if failed else 0)
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for col in ("device", "class", "catalog entry", "SoC / model", "OS", "RAM", "accelerators", "time", ""):
        table.add_column(col, overflow="fold")
    for o in outcomes:
        snap = o.snapshot
        if not o.ok:
            table.add_row(
                escape(o.name),
                "[red]failed[/]",
                "",
                "",
                "",
                "",
                "",
                f"{o.duration_s:.2f}s",
                "[dim]VIRTUAL[/]" if snap and snap.virtual else "",
            )
            continue
        s = summarize(snap.facts)
        table.add_row(
            escape(o.name),
            escape(snap.device_class or "?"),
            escape(snap.catalog_entry or "?"),
            escape(s["soc_model"] or "?"),
            escape(s["os"] or "?"),
            escape(s["ram"] or "?"),
            escape(", ".join(s["accelerators"]) or "-"),
            f"{snap.duration_s:.2f}s",
            "[dim]VIRTUAL[/]" if snap.virtual else "",
        )
    console.print(table)
    for o in failed:
        emit_error(f"{o.name}: {o.error or 'failed'}")
    console.print(f"[dim]{len(outcomes) - len(failed)} of {len(outcomes)} probed[/]")
    raise typer.Exit(1 if failed else 0)


# ---------------------------------------------------------------- edgelab facts DEVICE


def latest_snap(name: str):
    from edgelab.store.db import session_scope
    from edgelab.store.snapshots import latest_snapshot

    with session_scope(open_engine(), write=False) as s:
        return latest_snapshot(s, name)


def snap_meta(snap) -> dict[str, Any]:
    return {
        "id": snap.id,
        "device": snap.device_name,
        "taken_at": snap.taken_at.isoformat(),
        "duration_s": snap.duration_s,
        "edgelab_version": snap.edgelab_version,
        "family": snap.family,
        "facts_hash": snap.facts_hash,
        "virtual": snap.virtual,
    }


def _leaves(data: Any, prefix: str = "") -> list[tuple[str, Any]]:
    if isinstance(data, dict) and data and not prefix.endswith(("temperatures_c", "rails_mw", "software")):
        return [row for k, v in data.items() for row in _leaves(v, f"{prefix}.{k}" if prefix else k)]
    if isinstance(data, list) and data and isinstance(data[0], dict):
        return [row for i, v in enumerate(data) for row in _leaves(v, f"{prefix}[{i}]")]
    return [] if data in (None, [], {}, "") else [(prefix, data)]


def _fmt(v: Any) -> str:
    if isinstance(v, list):
        return ", ".join(str(x) for x in v)
    if isinstance(v, dict):
        return ", ".join(f"{k}={x}" for k, x in v.items())
    return str(v)


def facts_show(
    device: Annotated[str, typer.Argument(help="Device name.")],
    raw: Annotated[
        bool, typer.Option("--raw", help="The raw outputs the probe collected, section by section.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """The facts of DEVICE from its latest probe snapshot, grouped (`--raw`: what the device printed)."""
    from rich.table import Table

    snap = latest_snap(device)
    if json_out:
        body = {"snapshot": snap_meta(snap)}
        body.update(
            {"raw": snap.raw}
            if raw
            else {"facts": snap.facts, "classification": snap.classification, "warnings": snap.warnings}
        )
        print_json(body)
        return
    when = snap.taken_at.strftime("%Y-%m-%d %H:%M:%S UTC")
    virtual = "  [dim]VIRTUAL[/]" if snap.virtual else ""
    console.rule(
        f"[bold]{escape(device)}[/]  [dim]probed {when} in {snap.duration_s:.2f}s, "
        f"edgelab {escape(snap.edgelab_version)}, facts {snap.facts_hash[:12] if snap.facts_hash else '-'}"
        f"[/]{virtual}",
        align="left",
    )
    if raw:
        for name, sec in (snap.raw.get("sections") or {}).items():
            code = sec.get("exit_code")
            console.print(
                f"[bold cyan]== {escape(name)}[/] [dim](exit {'cut off' if code is None else code})[/]"
            )
            console.print(escape(sec.get("output", "")), highlight=False, markup=True, soft_wrap=True)
        if snap.raw.get("stderr"):
            console.print("[bold cyan]== stderr[/]")
            console.print(escape(snap.raw["stderr"]), highlight=False, soft_wrap=True)
        return
    facts = snap.facts or {}
    prov = facts.get("provenance") or {}
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for col in ("group", "fact", "value", "from"):
        table.add_column(
            col, overflow="fold", style="cyan" if col == "group" else ("dim" if col == "from" else None)
        )
    shown = {k: v for k, v in facts.items() if k not in ("provenance", "warnings")}
    shown["cpu"] = {k: v for k, v in (shown.get("cpu") or {}).items() if k != "raw_flags"}  # --json has them
    for key, value in _leaves(shown):
        group, _, rest = key.partition(".")
        if not rest:
            group, rest = key.split("[")[0], key
        src = prov.get(key) or prov.get(key.rsplit(".", 1)[0]) or prov.get(key.split(".")[0]) or ""
        table.add_row(escape(group), escape(rest), escape(_fmt(value)), escape(src))
    console.print(table)
    cls = snap.classification or {}
    if cls:
        console.print(
            f"[bold]class[/] {escape(str(cls.get('class')))}  [bold]catalog entry[/] "
            f"{escape(str(cls.get('entry')))}"
            + (f" ({escape(cls['entry_name'])})" if cls.get("entry_name") else "")
        )
    for w in snap.warnings:
        console.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)


class FactsGroup(TyperGroup):
    """`edgelab facts DEVICE` next to `edgelab facts parse FILE`: a first argument that is not a
    subcommand (nor an option) is a device name for the `show` command."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and not args[0].startswith("-") and args[0] not in self.commands:
            args = ["show", *args]
        return super().parse_args(ctx, args)

    def format_usage(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        formatter.write_usage(ctx.command_path, "[DEVICE [--raw] [--json] | parse FILE... | COMMAND ...]")


# ---------------------------------------------------------------- registration


def register(app: typer.Typer, facts_app: typer.Typer) -> None:
    """Top-level `probe`, and `facts DEVICE` routed to a `show` command."""
    app.command("probe")(probe)
    facts_app.info.cls = FactsGroup
    facts_app.command("show", help="The facts of DEVICE from its latest probe (same as `facts DEVICE`).")(
        facts_show
    )
