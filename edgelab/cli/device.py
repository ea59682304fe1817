"""`edgelab device ...`: the inventory. Thin: parse, call edgelab.inventory / edgelab.store, render."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from edgelab.cli.common import (
    JsonOpt,
    console,
    err_console,
    escape,
    fail,
    fail_from,
    open_engine,
    open_session,
    print_json,
)
from edgelab.errors import ConfigError

app = typer.Typer(help="The device inventory: add, list, check, trust, import.", no_args_is_help=True)
import_app = typer.Typer(help="Bring devices in from an ssh config or an adb server.", no_args_is_help=True)
app.add_typer(import_app, name="import")

STATE_STYLE = {"online": "green", "offline": "red", "unknown": "dim", "untrusted": "yellow"}


def _state_text(s: str) -> str:
    return f"[{STATE_STYLE.get(s, 'yellow')}]{s}[/]"


@app.command("add")
def add(
    name: Annotated[str, typer.Argument(help="Device name: lowercase letters, digits, '.', '_', '-'.")],
    ssh: Annotated[str | None, typer.Option("--ssh", help="[user@]host[:port]")] = None,
    jump: Annotated[
        str | None, typer.Option("--jump", help="ProxyJump host(s): [user@]host[:port][,...]")
    ] = None,
    adb: Annotated[str | None, typer.Option("--adb", help="ADB serial (as `adb devices` prints it).")] = None,
    adb_server: Annotated[
        str | None,
        typer.Option(
            "--adb-server",
            help="The adb server the phone hangs off: host:port (default: the local one), "
            "or ssh://[user@]labhost[:port][/adb_port] for one on another lab host's loopback, tunnelled "
            "over SSH (keys or the agent; trust its host key with `edgelab device trust NAME`)",
        ),
    ] = None,
    device_class: Annotated[
        str | None, typer.Option("--class", help="jetson | cuda_discrete | x86_cpu | arm64_cpu | npu_phone")
    ] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="A tag (repeatable).")] = None,
    notes: Annotated[str, typer.Option("--notes", help="Free text for operators.")] = "",
    shell: Annotated[
        str | None,
        typer.Option("--shell", help="posix | toybox | powershell (default posix for ssh, toybox for adb)"),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Add a device reached over SSH (--ssh) or ADB (--adb)."""
    from edgelab.inventory.build import adb_device, ssh_device
    from edgelab.store.devices import add_device

    if bool(ssh) == bool(adb):
        fail(
            "give exactly one of --ssh ADDRESS or --adb SERIAL",
            "e.g. edgelab device add orin --ssh nvidia@192.168.1.20",
            2,
        )
    if ssh and adb_server:
        fail("--adb-server goes with --adb, not --ssh", "drop --adb-server or use --adb SERIAL", 2)
    if adb and jump:
        fail(
            "--jump goes with --ssh, not --adb",
            "for a remote adb server use --adb-server host:port or ssh://labhost",
            2,
        )
    common = {"device_class": device_class, "tags": tag or [], "notes": notes, "shell": shell}
    try:
        device = (
            ssh_device(name, ssh, jump=jump, **common)
            if ssh
            else adb_device(name, adb, adb_server=adb_server, **common)
        )
    except ConfigError as err:
        fail_from(err, code=2)
    with open_session() as s:
        device = add_device(s, device)
    _show_one(device, as_json, added=True)


@app.command("ls")
def ls(
    tag: Annotated[str | None, typer.Option("--tag", help="Only devices with this tag.")] = None,
    device_class: Annotated[str | None, typer.Option("--class", help="Only devices of this class.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """List devices: class, transport, address, state, last seen, and whether each is virtual."""
    from edgelab.cli.common import state as cli_state
    from edgelab.inventory.view import address_of, ago, device_record
    from edgelab.store import quickread

    # a database at the shipped schema with no device under a lease: read it without the ORM's start-up cost
    quick = quickread.list_devices(url=cli_state.db, tag=tag, device_class=device_class, unleased=True)
    if quick is not None:
        columns, devices = quick
        holders: dict = {}
    else:
        from edgelab.lease import holders_by_device
        from edgelab.store.devices import list_devices

        with open_session(write=False) as s:
            devices = list_devices(s, tag=tag, device_class=device_class)
            holders = holders_by_device(s, devices)
        columns = None
    if as_json:
        print_json([{**device_record(d, columns), "lease": _lease_rec(holders.get(d.name))} for d in devices])
        return
    if not devices:
        err_console.print(
            "no devices. Add one with `edgelab device add NAME --ssh HOST` or `edgelab sim up`."
        )
        return
    rows = [
        (
            d.name,
            "VIRTUAL" if d.virtual else "",
            d.state or "unknown",
            d.device_class or "-",
            d.transport,
            ago(d.last_seen),
            _held_text(holders.get(d.name)),
            address_of(d),
            ",".join(d.tags),
        )
        for d in devices
    ]
    from rich.table import Table

    # The columns an operator scans first come first; only the last two may wrap.
    columns = ("NAME", "VIRTUAL", "STATE", "CLASS", "VIA", "SEEN", "HELD BY", "ADDRESS", "TAGS")
    widths = [max(len(col), *(len(r[i]) for r in rows)) for i, col in enumerate(columns)]
    table = Table(box=None, header_style="bold", pad_edge=False, padding=(0, 2, 0, 0))
    for col, widest in zip(columns, widths, strict=True):
        # Only ADDRESS and TAGS may wrap on a narrow terminal; the short columns keep their full text.
        flexible = col in ("ADDRESS", "TAGS")
        table.add_column(
            col,
            overflow="fold",
            no_wrap=not flexible,
            min_width=min(widest, 24) if flexible else widest,
        )
    for row in rows:
        name, virtual, state, *rest = row
        table.add_row(
            escape(name), "[cyan]VIRTUAL[/]" if virtual else "", _state_text(state), *map(escape, rest)
        )
    console.print(table)


def _lease_rec(lease) -> dict | None:
    if lease is None:
        return None
    return {
        "id": lease.id,
        "owner": lease.owner,
        "ci_job": lease.ci_job,
        "purpose": lease.purpose,
        "expires_at": lease.expires_at.isoformat(),
    }


def _held_text(lease) -> str:
    """``alice@lab1 (ci job) until 12:45`` (times UTC), as the TUI's fleet says it; empty when free."""
    from edgelab.inventory.view import held_text

    return "" if lease is None else held_text(lease.owner, lease.ci_job, lease.expires_at)


def _show_one(device, as_json: bool, added: bool = False, lease=None) -> None:
    from rich.table import Table

    from edgelab.inventory.view import ago, device_record

    rec = {**device_record(device), "lease": _lease_rec(lease)}
    if as_json:
        print_json(rec)
        return
    if added:
        console.print(
            f"added [bold]{device.name}[/] ({rec['address']})"
            + (" [cyan]VIRTUAL[/]" if device.virtual else "")
        )
        return
    table = Table(box=None, show_header=False)
    table.add_column(style="bold")
    table.add_column()
    for key, value in rec.items():
        if key == "state":
            value = _state_text(value)
        elif key == "virtual":
            value = "[cyan]VIRTUAL[/]" if value else "no"
        elif key == "last_seen":
            value = f"{value} ({ago(device.last_seen)})" if value else "never"
        elif key == "lease":
            value = escape(_held_text(lease) + (f" (lease {lease.id}, {lease.purpose})" if lease else ""))
        elif isinstance(value, list):
            value = escape(", ".join(map(str, value)))
        elif value not in (None, ""):
            value = escape(str(value))
        table.add_row(key, "-" if value in (None, "") else str(value))
    console.print(table)


@app.command("show")
def show(name: str, as_json: JsonOpt = False) -> None:
    """Everything the inventory knows about one device."""
    from edgelab.lease import holders_by_device
    from edgelab.store.devices import get_device

    with open_session(write=False) as s:
        device = get_device(s, name)
        lease = holders_by_device(s, [device]).get(name)
    _show_one(device, as_json, lease=lease)


@app.command("rm")
def rm(
    name: str,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Stop its running deployments and end its lease first (else refused while either exists).",
        ),
    ] = False,
) -> None:
    """Remove a device from the inventory (refused while a deployment runs on it or a lease holds it)."""
    from edgelab.inventory.retire import in_use, remove
    from edgelab.store.devices import get_device

    with open_session(write=False) as s:
        get_device(s, name)
    busy = in_use(open_engine(), name)
    if busy and not force:
        remove(open_engine(), name)  # refuses, naming what is in the way
    extra = (
        f" (stopping {', '.join(busy.runs) or 'nothing'}, ending lease {', '.join(busy.lease_ids) or '-'})"
        if busy
        else ""
    )
    if not yes and not typer.confirm(f"remove {name} from the inventory{extra}?", default=False, err=True):
        fail(f"{name} not removed", "pass --yes to remove without asking")
    done = remove(open_engine(), name, force=force)
    for run in done.runs:
        err_console.print(f"stopped {run}")
    for lid in done.lease_ids:
        err_console.print(f"ended lease {lid}")
    err_console.print(f"removed {name}")


@app.command("logs")
def logs(
    name: Annotated[str, typer.Argument(help="Device name.")],
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep printing new entries (Ctrl-C ends).")
    ] = False,
    lines: Annotated[int, typer.Option("--lines", "-n", help="How many recent entries.")] = 200,
) -> None:
    """The device's system log: logcat on Android, journalctl (or dmesg) on Linux and Jetson, the System
    event log on Windows."""
    import sys

    from edgelab.inventory.console import log_lines

    code, err = 0, ""
    try:
        for item in log_lines(open_engine(), name, lines=lines, follow=follow):
            if isinstance(item, tuple):
                code, err = item
                continue
            sys.stdout.write(item + "\n")
            sys.stdout.flush()
    except KeyboardInterrupt:
        return
    if code not in (0, None):
        fail(
            f"the log command on {name} exited {code}: {(err or '').strip()[-300:] or 'no message'}",
            "check that the device's user may read its log (Android: logcat; Linux: group systemd-journal or adm)",
        )


@app.command("check")
def check(
    names: Annotated[list[str] | None, typer.Argument(help="Devices to check.")] = None,
    all_: Annotated[bool, typer.Option("--all", help="Check every device.")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per device.", min=0.1)] = 5.0,
    as_json: JsonOpt = False,
) -> None:
    """Reach devices in parallel and record their state; exit 1 if any is not online."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
    from rich.table import Table

    from edgelab.inventory.check import check_and_record
    from edgelab.store.devices import get_device, list_devices

    if bool(names) == all_:
        fail("name the devices to check, or pass --all (not both)", "e.g. edgelab device check --all", 2)
    engine = open_engine()
    with open_session(write=False) as s:
        targets = [d.name for d in list_devices(s)] if all_ else [get_device(s, n).name for n in names]
    if not targets:
        fail(
            "no devices to check",
            "add one with `edgelab device add` or start the virtual lab with `edgelab sim up`",
        )
    with Progress(
        TextColumn("checking"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        console=err_console,
        transient=True,
    ) as progress:
        task = progress.add_task("", total=len(targets))

        def done(res) -> None:
            progress.update(task, advance=1, description=f"{res.name}: {res.state}")

        results = check_and_record(engine, targets, timeout=timeout, on_result=done)
    if as_json:
        print_json([r.as_dict() for r in results])
    else:
        table = Table(box=None, header_style="bold")
        for col in ("NAME", "TRANSPORT", "STATE", "TIME", "DETAIL"):
            table.add_column(col)
        for r in results:
            table.add_row(r.name, r.transport, _state_text(r.state), f"{r.duration_s:.2f}s", r.detail or "")
        console.print(table)
    bad = [r for r in results if not r.online]
    if bad:
        hints = {
            "untrusted": "edgelab device trust NAME",
            "unauthorized": "accept the USB debugging prompt on the device",
        }
        remedy = "; ".join(sorted({f"{r.state}: {hints[r.state]}" for r in bad if r.state in hints})) or None
        fail(f"{len(bad)} of {len(results)} not online: {', '.join(r.name for r in bad)}", remedy)


@app.command("trust")
def trust(
    name: str,
    replace: Annotated[
        bool, typer.Option("--replace", help="Replace a different key recorded before.")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask.")] = False,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds to wait for the device.")] = 5.0,
    as_json: JsonOpt = False,
) -> None:
    """Show an SSH device's host key fingerprint and, once confirmed, record it as trusted.

    A lab host on the way (a jump host, the SSH host of an ssh:// adb server) that is not trusted yet
    comes first: its key is shown and recorded (in known_hosts only); run trust again for the next."""
    from edgelab.inventory.trust import accept_offer, fetch_offer

    engine = open_engine()
    try:
        offer = fetch_offer(engine, name, timeout=timeout)
    except ConfigError as err:
        fail_from(err, code=2)
    summary = {
        "name": offer.name,
        "host": offer.host,
        "port": offer.port,
        "key_type": offer.key_type,
        "fingerprint": offer.fingerprint,
        "recorded_fingerprint": offer.recorded_fingerprint,
        "via": offer.via,
    }
    out = err_console if as_json else console
    who = f"lab host {offer.via} on the way to {name}" if offer.via else name
    out.print(f"{who} ({offer.host}:{offer.port}) presents a [bold]{offer.key_type}[/] key", highlight=False)
    out.print(f"  fingerprint [bold]{offer.fingerprint}[/]", highlight=False)
    if offer.changed:
        out.print(
            f"[bold red]  WARNING: the recorded key was {offer.recorded_fingerprint}: the host key CHANGED[/]"
        )
        if not replace:
            fail(
                f"{name}'s host key changed; not replacing it",
                f"verify the new key on the device, then run `edgelab device trust {name} --replace`",
            )
    if offer.already_trusted:
        out.print("  already trusted")
    elif not yes and not typer.confirm("trust this key?", default=False, err=True):
        fail(
            f"{name}'s host key not trusted",
            "compare the fingerprint with the device's own (ssh-keygen -lf /etc/ssh/ssh_host_*.pub)",
        )
    accept_offer(engine, offer, replace=replace)
    if as_json:
        print_json({**summary, "trusted": True})
    elif not offer.already_trusted:
        console.print(
            f"trusted lab host {offer.via} (run `edgelab device trust {name}` again for the next key)"
            if offer.via
            else f"trusted {name}",
            highlight=False,
        )


def _print_import(report, as_json: bool, source: str) -> None:
    if as_json:
        print_json(report.as_dict())
        return
    for d in report.added:
        from edgelab.inventory.view import address_of

        console.print(f"added [bold]{d.name}[/] ({address_of(d)})")
    for note in report.notes:
        err_console.print(f"note: {note}", markup=False, highlight=False, soft_wrap=True)
    for n, why in report.skipped:
        err_console.print(f"skipped {n}: {why}", highlight=False)
    console.print(f"{len(report.added)} added, {len(report.skipped)} skipped from {source}")


@import_app.command("ssh-config")
def import_ssh_config(
    file: Annotated[Path, typer.Option("--file", help="OpenSSH config to read.")] = Path("~/.ssh/config"),
    pattern: Annotated[
        str | None, typer.Option("--pattern", help="Only Host aliases matching this glob.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Add every concrete Host of an OpenSSH config (wildcard blocks are skipped)."""
    from edgelab.inventory import importers

    path = file.expanduser()
    try:
        with open_session() as s:
            report = importers.import_ssh_config(s, path, pattern)
    except ConfigError as err:
        fail_from(err, code=2 if not path.is_file() else 1)
    _print_import(report, as_json, str(path))


@import_app.command("adb")
def import_adb(
    adb_server: Annotated[
        str | None, typer.Option("--adb-server", help="host:port (default: the local server)")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Add every device the adb server sees, named from its serial."""
    from edgelab.inventory import importers

    with open_session() as s:
        report = importers.import_adb(s, adb_server)
    _print_import(report, as_json, f"adb server {adb_server or 'local'}")
