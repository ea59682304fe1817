"""`edgelab push`: verified, resumable pushes into device stores, thin over edgelab.artifacts.service."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

from edgelab.cli.common import (
    JsonOpt,
    LeaseOpt,
    console,
    err_console,
    escape,
    fail,
    fail_from,
    open_engine,
    print_json,
)
from edgelab.errors import ConfigError


def push(
    artifacts: Annotated[list[str], typer.Argument(help="Artifact names or digest prefixes.")],
    device: Annotated[
        list[str] | None, typer.Option("--device", "-d", help="Target device (repeatable).")
    ] = None,
    all_devices: Annotated[bool, typer.Option("--all", help="Every device in the inventory.")] = False,
    verify: Annotated[
        bool,
        typer.Option("--verify", help="Re-hash blobs already on the device even if recorded as verified."),
    ] = False,
    parallel: Annotated[int, typer.Option("--parallel", help="Devices pushed at once.")] = 8,
    lease: LeaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Push artifacts into device stores: skip verified blobs, resume cut uploads, verify SHA-256 on the device."""
    if device and all_devices:
        fail("give --device or --all, not both", code=2)
    opened: dict = {}  # transports the re-push check left open for the push (an SSH login made)
    try:
        if device and not verify and lease is None:
            from edgelab.artifacts.quickpush import quick_repush
            from edgelab.cli.common import state

            # nothing to send: answered without the ORM
            quick = quick_repush(artifacts, device, url=state.db, keep=opened)
            if quick is not None:
                _report(quick, as_json)
                return
        results = _push(artifacts, device, all_devices, verify, parallel, lease, as_json, opened)
    finally:
        for t in opened.values():
            t.close()
    _report(results, as_json)


def _push(artifacts, device, all_devices, verify, parallel, lease, as_json, opened):
    with _progress_bar(enabled=not as_json and _is_terminal(sys.stderr)) as progress:
        results = None
        if device and not verify and lease is None:
            from edgelab.artifacts.quickpush import quick_push
            from edgelab.cli.common import state

            results = quick_push(
                artifacts, device, url=state.db, progress=progress, workers=parallel, sessions=opened
            )
        if results is None:
            from edgelab.artifacts.service import push_artifacts, resolve_devices

            engine = open_engine()
            try:
                devices = resolve_devices(engine, device or [], all_devices)
            except ConfigError as err:  # bad input here is a usage error: exit 2 (root handler: 1)
                fail_from(err, code=2)
            blobs, results = push_artifacts(
                engine,
                artifacts,
                devices,
                verify=verify,
                progress=progress,
                workers=parallel,
                lease_id=lease,
            )
    return results


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def _progress_bar(enabled: bool) -> Iterator[Callable[[str, str, int, int], None] | None]:
    """Live transfer bars on stderr when it is a terminal, as git and curl show progress; a pipe or a
    CI log gets the result lines only (they say the same), and Rich's live display is not loaded."""
    if not enabled:
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    tasks: dict[tuple[str, str], int] = {}
    columns = (TextColumn("{task.description}"), BarColumn(), DownloadColumn(), TransferSpeedColumn())
    with Progress(*columns, console=err_console) as bar:

        def progress(dev: str, sha: str, done: int, total: int) -> None:
            key = (dev, sha)
            if key not in tasks:
                tasks[key] = bar.add_task(f"{escape(dev)} {sha[:12]}", total=total)
            bar.update(tasks[key], completed=done)

        yield progress


def _report(results, as_json: bool) -> None:
    data = [
        {
            "device": r.device,
            "ok": r.ok,
            "error": r.error,
            "remedy": r.remedy,
            "blobs": [
                {
                    "sha256": b.sha256,
                    "size": b.size,
                    "status": b.status,
                    "remote_path": b.remote_path,
                    "sent": b.sent,
                    "resumed_from": b.resumed_from,
                    "attempts": b.attempts,
                    "seconds": round(b.seconds, 3),
                    "bytes_per_s": round(b.throughput),
                    "notes": b.notes,
                    "via": b.via,
                    "hasher": b.hasher,
                }
                for b in r.blobs
            ],
        }
        for r in results
    ]
    if as_json:
        print_json(data)
    else:
        for r in results:
            if not r.ok:
                console.print(
                    f"[red]{escape(r.device)}: {escape(r.error or '')}[/]"
                    + (f"\n  -> {escape(r.remedy)}" if r.remedy else "")
                )
                continue
            for b in r.blobs:  # plain lines, whole for grep: no Rich import for the everyday answer
                rate = f" {b.throughput / 1e6:.1f} MB/s" if b.sent else ""
                how = f" ({b.via}, hashed by {b.hasher})" if b.sent and b.via else ""
                print(
                    f"{r.device}  {b.sha256[:16]}  {b.status:9} {b.sent:>12} B sent in {b.seconds:.2f}s{rate}{how}"
                )
    if any(not r.ok for r in results):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("push")(push)
