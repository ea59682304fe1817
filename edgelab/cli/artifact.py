"""`edgelab artifact add/ls/show/rm/import/export`: thin over edgelab.artifacts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from edgelab.cli.common import JsonOpt, console, escape, open_session, print_json
from edgelab.units import human_bytes

app = typer.Typer(
    help="Artifact registry: runtime builds, weights, graphs, tokenizers, voices.", no_args_is_help=True
)


def _as_dict(session, art) -> dict:
    from edgelab.artifacts.manifest import to_manifest

    d = to_manifest(session, art)
    d["created_at"] = art.created_at.isoformat()
    d["total_size"] = art.total_size
    return d


@app.command("add")
def add(
    paths: Annotated[list[Path], typer.Argument(help="Files (or directories) of the artifact.")],
    kind: Annotated[
        str, typer.Option("--kind", help="runtime, weights, graph, tokenizer, voice, config, other")
    ],
    target: Annotated[
        str, typer.Option("--target", help="Target ABI, e.g. android-arm64, linux-aarch64-cuda-sm87, any")
    ],
    name: Annotated[
        str | None, typer.Option("--name", help="Artifact name (default: the first file's name).")
    ] = None,
    component: Annotated[
        str | None, typer.Option("--component", help="Component it provides (default: the name).")
    ] = None,
    meta: Annotated[
        list[str] | None,
        typer.Option(
            "--meta", help="KEY=VALUE; provenance keys (source_commit, toolchain, ...) go to provenance."
        ),
    ] = None,
    replace: Annotated[
        bool, typer.Option("--replace", help="Overwrite an artifact of the same name.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Register files as one artifact; each file is hashed once (cached by path, size and mtime)."""
    from edgelab.artifacts.registry import add_artifact, parse_meta

    prov, extra = parse_meta(meta or [])
    with open_session() as s:
        art = add_artifact(
            s,
            name or paths[0].name,
            paths,
            kind=kind,
            target=target,
            component=component,
            provenance=prov,
            meta=extra,
            replace=replace,
        )
        data = _as_dict(s, art)
    if as_json:
        print_json(data)
    else:
        console.print(
            f"added [bold]{escape(data['name'])}[/] {data['digest'][:16]} ({len(data['files'])} files, {human_bytes(data['total_size'])})"
        )


@app.command("ls")
def ls(
    kind: Annotated[str | None, typer.Option("--kind")] = None,
    target: Annotated[str | None, typer.Option("--target")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Registered artifacts."""
    from rich.table import Table

    from edgelab.artifacts.registry import list_artifacts

    with open_session(write=False) as s:
        arts = list_artifacts(s, kind=kind, target=target)
        rows = [_as_dict(s, a) for a in arts]
    if as_json:
        print_json(rows)
        return
    table = Table("name", "kind", "target", "files", "size", "digest", box=None)
    for r in rows:
        table.add_row(
            escape(r["name"]),
            r["kind"],
            r["target"],
            str(len(r["files"])),
            human_bytes(r["total_size"]),
            r["digest"][:16],
        )
    console.print(table if rows else "no artifacts (add one with `edgelab artifact add`)")


@app.command("show")
def show(
    ref: Annotated[str, typer.Argument(help="Name or digest prefix.")], as_json: JsonOpt = False
) -> None:
    """One artifact: files with SHA-256, provenance, metadata, validation records."""
    from edgelab.artifacts.registry import get_artifact

    with open_session(write=False) as s:
        data = _as_dict(s, get_artifact(s, ref))
    if as_json:
        print_json(data)
        return
    console.print(
        f"[bold]{escape(data['name'])}[/]  kind={data['kind']} target={data['target']} component={escape(str(data['component']))}"
    )
    console.print(
        f"digest  {data['digest']}   size {human_bytes(data['total_size'])}   added {data['created_at']}"
    )
    console.print("[bold]files[/]")
    for path, sha in data["files"].items():
        console.print(f"  {sha}  {human_bytes(data['sizes'][path]):>10}  {escape(path)}")
    meta = dict(data["metadata"])
    prov = meta.pop("provenance", {})
    console.print(
        "[bold]provenance[/]"
        + ("" if prov else "  (none recorded: add --meta source_commit=... toolchain=...)")
    )
    for k, v in prov.items():
        console.print(f"  {k}: {escape(str(v))}")
    if meta:
        console.print("[bold]metadata[/]")
        for k, v in meta.items():
            console.print(f"  {k}: {escape(str(v))}")
    console.print("[bold]validation[/]" + ("" if data["validation"] else "  (none yet)"))
    for v in data["validation"]:
        console.print(f"  {escape(json.dumps(v, default=str))}")


@app.command("rm")
def rm(ref: Annotated[str, typer.Argument(help="Name or digest prefix.")]) -> None:
    """Forget an artifact (device stores keep its blobs until `edgelab gc`)."""
    from edgelab.artifacts.registry import remove_artifact

    with open_session() as s:
        art = remove_artifact(s, ref)
    console.print(f"removed {escape(art.name)}")


@app.command("export")
def export(
    ref: Annotated[str, typer.Argument(help="Name or digest prefix.")],
    output: Annotated[
        Path | None, typer.Option("-o", "--output", help="Write here instead of stdout.")
    ] = None,
) -> None:
    """The artifact's JSON manifest (component, files {path: sha256}, metadata)."""
    from edgelab.artifacts.manifest import export_manifest

    with open_session(write=False) as s:
        data = export_manifest(s, ref)
    if output:
        output.write_text(json.dumps(data, indent=2) + "\n")
        console.print(f"wrote {output}")
    else:
        print_json(data)


@app.command("import")
def import_(
    manifest: Annotated[Path, typer.Argument(help="A JSON manifest.")],
    base: Annotated[
        Path | None, typer.Option("--base", help="Where its files lie (default: the manifest's folder).")
    ] = None,
    replace: Annotated[bool, typer.Option("--replace")] = False,
) -> None:
    """Register the artifact a manifest describes; every file must hash as the manifest says."""
    from edgelab.artifacts.manifest import import_manifest

    with open_session() as s:
        art = import_manifest(s, manifest, base=base, replace=replace)
    console.print(f"imported {escape(art.name)} {art.digest[:16]}")
