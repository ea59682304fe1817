"""`edgelab runtime ls / show / build`: thin over edgelab.runtimes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from edgelab.cli.common import JsonOpt, console, err_console, escape, fail_from, print_json, state
from edgelab.errors import ConfigError, EdgelabError

app = typer.Typer(
    help="Runtimes (runtimes/*.yaml): builds per target and launch templates.", no_args_is_help=True
)
DirOpt = Annotated[
    Path | None, typer.Option("--dir", help="Runtime files folder (default: runtimes/ of this edgelab).")
]


def _load(folder: Path | None):
    from edgelab.runtimes import load_runtimes

    try:
        return load_runtimes(folder)
    except EdgelabError as err:
        fail_from(err)


def _dict(spec) -> dict:
    from edgelab.runtimes.build import check_toolchain

    return {
        "name": spec.name,
        "description": spec.description,
        "source": {"repo": spec.repo, "ref": spec.ref, "pip": spec.pip, **spec.extra},
        "file": spec.file,
        "targets": {
            t: {
                "toolchain": list(r.toolchain),
                "flags": list(r.flags),
                "steps": [list(s) for s in r.steps],
                "produces": list(r.produces),
                "missing": [str(m) for m in check_toolchain(r)],
            }
            for t, r in spec.targets.items()
        },
        "launch": {p: {s: list(a) for s, a in v.items()} for p, v in spec.launch.items()},
    }


@app.command("ls")
def ls(folder: DirOpt = None, as_json: JsonOpt = False) -> None:
    """Every runtime with its targets, and whether this host can build each."""
    from rich.table import Table

    specs = _load(folder)
    rows = [_dict(s) for s in specs.values()]
    if as_json:
        print_json(rows)
        return
    table = Table("runtime", "source", "targets (buildable here marked *)", box=None)
    for r in rows:
        src = r["source"]
        where = (
            f"{src['repo']}@{src['ref']}" if src.get("repo") else (src.get("pip") or src.get("local") or "")
        )
        targets = ", ".join(t + ("*" if not v["missing"] else "") for t, v in r["targets"].items())
        table.add_row(escape(r["name"]), escape(where), escape(targets))
    console.print(table)


@app.command("show")
def show(name: str, folder: DirOpt = None, as_json: JsonOpt = False) -> None:
    """One runtime: source pin, per-target recipe (toolchain, flags, steps, outputs), launch templates."""
    specs = _load(folder)
    if name not in specs:
        fail_from(ConfigError(f"no runtime {name!r}", remedy=f"known: {', '.join(sorted(specs))}"))
    d = _dict(specs[name])
    if as_json:
        print_json(d)
        return
    console.print(f"[bold]{escape(d['name'])}[/]  {escape(d['description'])}\n  file {escape(d['file'])}")
    console.print(f"  source {escape(str({k: v for k, v in d['source'].items() if v}))}")
    for t, r in d["targets"].items():
        state_text = (
            "[green]buildable here[/]"
            if not r["missing"]
            else "[yellow]missing: " + escape("; ".join(r["missing"])) + "[/]"
        )
        console.print(f"[bold]target {t}[/]  {state_text}")
        console.print(f"  toolchain {', '.join(r['toolchain'])}")
        if r["flags"]:
            console.print(f"  flags     {escape(' '.join(r['flags']))}")
        for s in r["steps"]:
            console.print(f"  $ {escape(' '.join(s))}")
        console.print(f"  produces  {escape(', '.join(r['produces']))}")
    console.print("[bold]launch[/]")
    for p, strategies in d["launch"].items():
        for s, argv in strategies.items():
            console.print(f"  {p} {s}: {escape(' '.join(argv))}")


@app.command("build")
def build(
    name: str,
    target: Annotated[str, typer.Option("--target", help="e.g. android-arm64, linux-aarch64-cuda-sm87")],
    artifact_name: Annotated[
        str | None, typer.Option("--name", help="Artifact name (default NAME-TARGET).")
    ] = None,
    workdir: Annotated[
        Path | None, typer.Option("--workdir", help="Build folder (default ~/.edgelab/builds/NAME/TARGET).")
    ] = None,
    folder: DirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the recipe where its toolchain is present and register the result with provenance."""
    from edgelab.artifacts.manifest import to_manifest
    from edgelab.config import state_dir
    from edgelab.runtimes.build import build_runtime
    from edgelab.store.db import get_engine, session_scope

    specs = _load(folder)
    if name not in specs:
        fail_from(ConfigError(f"no runtime {name!r}", remedy=f"known: {', '.join(sorted(specs))}"), code=2)
    wd = workdir or state_dir() / "builds" / name / target
    try:
        engine = get_engine(state.db)
        with session_scope(engine) as s:
            art = build_runtime(
                s,
                specs[name],
                target,
                wd,
                name=artifact_name,
                log=lambda line: err_console.print(f"[dim]$ {escape(line)}[/]"),
            )
            data = to_manifest(s, art)
    except EdgelabError as err:
        fail_from(err)
    if as_json:
        print_json(data)
    else:
        console.print(
            f"built and registered [bold]{escape(data['name'])}[/] {data['digest'][:16]} ({len(data['files'])} files)"
        )
        for k, v in data["metadata"]["provenance"].items():
            console.print(f"  {k}: {escape(str(v))}")
