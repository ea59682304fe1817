"""`edgelab reserve`, `release`, `leases`: device leases, thin over edgelab.lease."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from edgelab.cli.common import JsonOpt, console, err_console, escape, fail, fail_from, open_engine, print_json
from edgelab.errors import ConfigError, EdgelabError

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str, option: str = "--for") -> float:
    """``30m``, ``2s``, ``1h30m``, ``90`` (seconds) -> seconds."""
    raw = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        return float(raw)
    parts = re.findall(r"(\d+(?:\.\d+)?)([smhd])", raw)
    if not parts or "".join(n + u for n, u in parts) != raw:
        raise ConfigError(
            f"{option} {text!r} is not a duration", remedy=f"write it as e.g. {option} 30m, 90s, 1h30m"
        )
    return sum(float(n) * _UNITS[u] for n, u in parts)


def lease_dict(lease, devices) -> dict[str, Any]:
    return {
        "id": lease.id,
        "devices": [d.device_name for d in devices],
        "owner": lease.owner,
        "ci_job": lease.ci_job,
        "purpose": lease.purpose,
        "auto": lease.auto,
        "users": lease.users,
        "ttl_s": lease.ttl_s,
        "acquired_at": lease.acquired_at.isoformat(),
        "heartbeat_at": lease.heartbeat_at.isoformat(),
        "expires_at": lease.expires_at.isoformat(),
        "released_at": lease.released_at.isoformat() if lease.released_at else None,
        "end_reason": lease.end_reason,
        "ended_by": lease.ended_by,
    }


def _left(until: datetime) -> str:
    s = (until - datetime.now(UTC)).total_seconds()
    if s <= 0:
        return "expired"
    return f"{s:.0f}s" if s < 120 else f"{s / 60:.0f}m" if s < 7200 else f"{s / 3600:.1f}h"


def reserve(
    devices: Annotated[
        list[str] | None, typer.Argument(help="Devices to reserve (all of them, or none).")
    ] = None,
    tag: Annotated[str | None, typer.Option("--tag", help="Any free device with this tag.")] = None,
    device_class: Annotated[
        str | None, typer.Option("--class", help="Any free device of this class.")
    ] = None,
    count: Annotated[
        int | None, typer.Option("--count", help="How many devices of the tag/class (default 1).")
    ] = None,
    for_: Annotated[
        str, typer.Option("--for", help="Lease duration (TTL): 30m, 2h, 90s. Renewed while --run runs.")
    ] = "30m",
    wait: Annotated[bool, typer.Option("--wait", help="Wait until the devices are free.")] = False,
    timeout: Annotated[str, typer.Option("--timeout", help="How long --wait waits.")] = "10m",
    kick: Annotated[
        bool,
        typer.Option(
            "--kick", help="Take the named devices over from their holder (recorded on the holder's lease)."
        ),
    ] = False,
    purpose: Annotated[str, typer.Option("--purpose", help="What it is for (shown to others).")] = "",
    run: Annotated[
        str | None,
        typer.Option(
            "--run",
            help="Run this shell command under the lease "
            "(EDGELAB_LEASE set), renew it meanwhile, release it after.",
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    """Lease devices so nobody else's deploy, bench, play or push touches them until you release them.

    \b
    Examples:
      edgelab reserve s25 --for 30m      then: export EDGELAB_LEASE=<id>
      edgelab reserve --tag phone --count 2 --wait --run 'edgelab play ci.yaml'

    A holder that stops renewing (killed, cancelled CI job) loses the lease after its TTL.
    """
    from edgelab.errors import LeaseHeld
    from edgelab.lease import acquire, whoami

    if sum(bool(x) for x in (devices, tag, device_class)) != 1:
        fail(
            "name devices, or give --tag or --class (one of them)",
            "e.g. `edgelab reserve s25 --for 30m`",
            code=2,
        )
    if kick and not devices:
        fail("--kick takes device names", "e.g. `edgelab reserve --kick s25`", code=2)
    if count is not None and devices:
        fail("--count goes with --tag or --class", code=2)
    try:
        ttl = parse_duration(for_)
        wait_s = parse_duration(timeout, "--timeout")
    except ConfigError as err:
        fail_from(err, code=2)
    engine = open_engine()
    me = whoami()
    try:
        lease = acquire(
            engine,
            names=list(devices or []),
            tag=tag,
            device_class=device_class,
            count=count,
            ttl_s=ttl,
            purpose=purpose or (f"run: {run}" if run else "" if kick else "reserve"),
            holder=me,
            wait=wait,
            timeout_s=wait_s,
            kick=kick,
        )
    except LeaseHeld as err:
        if json_out:
            print_json(
                {
                    "refused": str(err),
                    "remedy": err.remedy,
                    "holder": lease_dict(err.lease, []) if err.lease else None,
                }
            )
            raise typer.Exit(1) from None
        fail_from(err)
    except ConfigError as err:
        fail_from(err, code=2)
    from edgelab.lease.service import devices_of
    from edgelab.store.db import session_scope

    with session_scope(engine, write=False) as s:
        rows = devices_of(s, lease.id)
    names = ", ".join(r.device_name for r in rows)
    if run is None:
        if json_out:
            print_json(lease_dict(lease, rows))
            return
        console.print(
            f"reserved [bold]{escape(names)}[/] (lease [bold]{lease.id}[/]) until "
            f"{lease.expires_at:%H:%M:%S} UTC",
            highlight=False,
        )
        err_console.print(
            f"  [dim]->[/] export EDGELAB_LEASE={lease.id} to work under it; "
            f"`edgelab release {lease.id}` when done",
            highlight=False,
        )
        return
    raise typer.Exit(_run_under(engine, lease.id, names, run))


def _run_under(engine, lease_id: str, names: str, command: str) -> int:
    """Run ``command`` with EDGELAB_LEASE set, renewing the lease; release it after (even on Ctrl-C)."""
    import os
    import subprocess

    from edgelab.lease import release
    from edgelab.lease.use import Heartbeat, Use, ttls_of

    use = Use(f"run under {lease_id}", by_device={n: lease_id for n in names.split(", ")})

    def lost(why: str) -> None:
        err_console.print(f"[bold red]lease lost:[/] {escape(why)}", highlight=False)

    beat = Heartbeat(engine, use, ttls_of(engine, use), lost).start()
    err_console.print(
        f"[dim]reserved {escape(names)} (lease {lease_id}); running: {escape(command)}[/]", highlight=False
    )
    try:
        proc = subprocess.run(["/bin/sh", "-c", command], env={**os.environ, "EDGELAB_LEASE": lease_id})
        code = proc.returncode
    except KeyboardInterrupt:
        code = 130
    finally:
        beat.stop()
        try:
            release(engine, lease_id)
        except EdgelabError as err:  # kept: the command's exit code wins; a failed release is a warning
            err_console.print(
                f"[yellow]lease {lease_id} not released: {escape(str(err))}[/]", highlight=False
            )
    return code if code >= 0 else 128 - code


def release_cmd(
    refs: Annotated[
        list[str] | None,
        typer.Argument(help="Lease ids or device names (default: EDGELAB_LEASE, else all your open leases)."),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Also someone else's lease (recorded as a kick).")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """End leases so others can take the devices."""
    import os

    from edgelab.lease import holders_by_device, list_leases, release, whoami
    from edgelab.lease.service import mine
    from edgelab.store.db import session_scope
    from edgelab.store.devices import get_device

    engine = open_engine()
    me = whoami()
    ids: list[str] = []
    with session_scope(engine, write=False) as s:
        from edgelab.store.leases import Lease

        for ref in refs or []:
            if s.get(Lease, ref) is not None:
                ids.append(ref)
                continue
            device = get_device(s, ref)
            lease = holders_by_device(s, [device]).get(device.name)
            if lease is None:
                fail(f"{ref} is not leased", "see `edgelab leases`")
            ids.append(lease.id)
        if not refs:
            env = os.environ.get("EDGELAB_LEASE")
            ids = [env] if env else [lease.id for lease, _ in list_leases(s) if mine(lease, me)]
    if not ids:
        fail("you hold no lease", "see `edgelab leases`")
    done = [release(engine, lid, holder=me, force=force) for lid in dict.fromkeys(ids)]
    if json_out:
        print_json(
            [{"id": lease.id, "end_reason": lease.end_reason, "ended_by": lease.ended_by} for lease in done]
        )
        return
    for lease in done:
        console.print(
            f"lease {lease.id}: {lease.end_reason} ({escape(lease.ended_by or '')})", highlight=False
        )


def leases(
    all_: Annotated[
        bool, typer.Option("--all", help="Ended leases too (released, expired, kicked: by whom).")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Who holds which device, for what, until when (expired leases are freed as this looks)."""
    from rich.table import Table

    from edgelab.lease import list_leases, sweep
    from edgelab.store.db import session_scope

    engine = open_engine()
    with session_scope(engine) as s:
        sweep(s)
    from edgelab.lease.service import kept_by

    with session_scope(engine, write=False) as s:
        rows = list_leases(s, include_ended=all_)
        kept = {lease.id: kept_by(s, lease.id) for lease, _ in rows if lease.released_at is None}
    if json_out:
        print_json(
            [{**lease_dict(lease, devs), "kept_by_runs": kept.get(lease.id, [])} for lease, devs in rows]
        )
        return
    if not rows:
        err_console.print("no leases. Take one with `edgelab reserve DEVICE --for 30m`.")
        return
    table = Table(box=None, header_style="bold", pad_edge=False, padding=(0, 2, 0, 0))
    for col in ("LEASE", "DEVICES", "HOLDER", "PURPOSE", "UNTIL", "LEFT", "STATE"):
        table.add_column(col, overflow="fold")
    for lease, devs in rows:
        who = lease.owner + (f" ({lease.ci_job})" if lease.ci_job else "")
        state = "open" if lease.released_at is None else f"{lease.end_reason}: {lease.ended_by}"
        runs = kept.get(lease.id)
        until = f"stop of {', '.join(runs)}" if runs else f"{lease.expires_at:%H:%M:%S}"
        left = "-" if lease.released_at is not None or runs else _left(lease.expires_at)
        table.add_row(
            lease.id,
            escape(", ".join(d.device_name for d in devs)),
            escape(who),
            escape(lease.purpose),
            until,
            left,
            escape(state),
        )
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("reserve")(reserve)
    app.command("release")(release_cmd)
    app.command("leases")(leases)
