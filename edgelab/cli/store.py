"""`edgelab store ls|rm DEVICE` and `edgelab gc DEVICE`: a device's content-addressed store (what it
holds, what goes), thin over edgelab.artifacts.service; `edgelab push` fills it (cli/push.py)."""

from __future__ import annotations

from typing import Annotated

import typer

from edgelab.cli.common import JsonOpt, LeaseOpt, console, escape, open_engine, print_json

store_app = typer.Typer(help="Device content-addressed stores.", no_args_is_help=True)


@store_app.command("ls")
def store_ls(device: Annotated[str, typer.Argument()], as_json: JsonOpt = False) -> None:
    """What a device's store holds, and which artifacts name each blob."""
    from rich.table import Table

    from edgelab.artifacts.service import store_ls as do_ls

    root, rows = do_ls(open_engine(), device)
    if as_json:
        print_json(
            {
                "root": root,
                "entries": [
                    {"name": r.name, "size": r.size, "artifacts": r.artifacts, "verified_at": r.verified_at}
                    for r in rows
                ],
            }
        )
        return
    console.print(f"{escape(device)}: {escape(root)}")
    table = Table("blob", "size", "artifacts", "verified", box=None)
    for r in rows:
        table.add_row(
            r.name,
            str(r.size),
            escape(", ".join(r.artifacts)) or "[dim](unreferenced)[/]",
            r.verified_at or "-",
        )
    console.print(table if rows else "  (empty)")


@store_app.command("rm")
def store_rm(
    device: Annotated[str, typer.Argument(help="The device whose store to clean.")],
    artifacts: Annotated[list[str], typer.Argument(help="Artifacts (name or id) whose blobs go.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only list what would be removed.")] = False,
    lease: LeaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Remove artifacts' blobs from a device's store, and the records that they were verified there.

    The artifacts stay registered; the next `edgelab push` sends them again. Use it to free space
    on a device, or to time a fresh push:

        edgelab store rm s25 qwen3-tts-talker-q4 && edgelab push qwen3-tts-talker-q4 -d s25
    """
    from edgelab.artifacts.service import store_rm as do_rm

    gone = do_rm(open_engine(), device, artifacts, dry_run=dry_run, lease_id=lease)
    if as_json:
        print_json([{"name": r.name, "size": r.size, "artifacts": r.artifacts} for r in gone])
        return
    verb = "would remove" if dry_run else "removed"
    for r in gone:
        print(f"{verb} {r.name} ({r.size} B; {', '.join(r.artifacts)})")
    print(f"{verb} {len(gone)} file(s), {sum(r.size for r in gone)} B from {device}")


def gc(
    device: Annotated[str, typer.Argument()],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only list what would be removed.")] = False,
    lease: LeaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Remove blobs in a device's store that no registered artifact references (and stale partials)."""
    from edgelab.artifacts.service import gc_device

    gone = gc_device(open_engine(), device, dry_run=dry_run, lease_id=lease)
    if as_json:
        print_json([{"name": r.name, "size": r.size} for r in gone])
        return
    verb = "would remove" if dry_run else "removed"
    for r in gone:
        console.print(f"{verb} {r.name} ({r.size} B)")
    console.print(f"{verb} {len(gone)} file(s), {sum(r.size for r in gone)} B")


def register(app: typer.Typer) -> None:
    app.command("gc")(gc)
    app.add_typer(store_app, name="store")
