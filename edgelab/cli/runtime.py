"""`edgelab runtime ls / show / build / install`: thin over edgelab.runtimes (install: edgelab.deploy.venv_install)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from edgelab.cli.common import JsonOpt, LeaseOpt, console, err_console, escape, fail_from, print_json, state
from edgelab.errors import ConfigError

app = typer.Typer(
    help="Runtimes (runtimes/*.yaml): builds per target and launch templates.", no_args_is_help=True
)
DirOpt = Annotated[
    Path | None, typer.Option("--dir", help="Runtime files folder (default: runtimes/ of this edgelab).")
]


def _load(folder: Path | None):
    from edgelab.runtimes import load_runtimes

    return load_runtimes(folder)


def _dict(spec) -> dict:
    from edgelab.runtimes.build import check_toolchain

    return {
        "name": spec.name,
        "description": spec.description,
        "source": {"sdist": spec.sdist, "repo": spec.repo, "ref": spec.ref, "pip": spec.pip, **spec.extra},
        "file": spec.file,
        "targets": {
            t: {
                "toolchain": list(r.toolchain),
                "flags": list(r.flags),
                "steps": [list(s) for s in r.steps],
                "produces": list(r.produces),
                "isa": r.isa,
                "missing": [str(m) for m in check_toolchain(r)],
            }
            for t, r in spec.targets.items()
        },
        "launch": {p: {s: t.words() for s, t in v.items()} for p, v in spec.launch.items()},
        "launch_detail": {
            p: {
                s: {
                    "targets": list(t.targets),
                    "ready": t.ready.kind,
                    "adapter": t.adapter,
                    "placement": t.placement,
                    "port": t.port,
                    "where": t.where,
                }
                for s, t in v.items()
            }
            for p, v in spec.launch.items()
        },
        "venv": None
        if spec.venv is None
        else {
            "path": f"~/{spec.venv.path}",
            "python": spec.venv.python,
            "targets": {
                t: {
                    "install": [list(c) for c in v.install],
                    "pip_args": list(v.pip_args),
                    "fixups": list(v.fixups),
                }
                for t, v in spec.venv.targets.items()
            },
        },
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
            f"sdist {src['sdist']}"
            if src.get("sdist")
            else f"{src['repo']}@{src['ref']} (--source)"
            if src.get("repo")
            else (src.get("pip") or src.get("local") or "")
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
        if r["isa"]:
            console.print(f"  needs     {escape(r['isa'])} (instruction set)")
    if d.get("venv"):
        v = d["venv"]
        console.print(
            f"[bold]device venv[/] {escape(v['path'])} (made by {escape(v['python'])}; `edgelab runtime install`)"
        )
        for t, r in v["targets"].items():
            console.print(f"  {t}:")
            for call in r["install"]:
                console.print(f"    pip install {escape(' '.join([*r['pip_args'], *call]))}")
            if r["fixups"]:
                console.print(f"    fix-ups {escape(', '.join(r['fixups']))}")
    console.print("[bold]launch[/]")
    for p, strategies in d["launch"].items():
        for s, argv in strategies.items():
            info = d["launch_detail"][p][s]
            console.print(f"  {p} {s}: {escape(' '.join(argv))}")
            console.print(
                f"      ready {info['ready']}, adapter {info['adapter']}, placement {info['placement']}",
                highlight=False,
            )


def _device_options(engine, name: str) -> dict[str, str]:
    """Build options from a device's newest facts: its NVIDIA GPU's architecture (sm_87 -> 87)."""
    from edgelab.probe.facts import Facts
    from edgelab.store.db import session_scope
    from edgelab.store.snapshots import latest_snapshot

    with session_scope(engine, write=False) as s:
        facts = Facts.from_dict(latest_snapshot(s, name).facts or {})
    archs = [a.cuda_arch for a in facts.accelerators if a.cuda_arch]
    if not archs:
        fail_from(
            ConfigError(
                f"{name}'s facts name no CUDA architecture",
                remedy=f"probe it again (`edgelab probe {name}`), or give --cuda-arch",
            ),
            code=2,
        )
    return {"cuda_arch": "".join(ch for ch in archs[0] if ch.isdigit())}


@app.command("build")
def build(
    name: str,
    target: Annotated[
        str, typer.Option("--target", help="e.g. linux-x86_64, android-arm64, linux-aarch64-cuda-sm87")
    ],
    source: Annotated[
        str | None,
        typer.Option(
            "--source",
            help="Source tree: a folder, a tarball, the llama-cpp-python sdist (it vendors llama.cpp), "
            "pypi:llama-cpp-python==0.3.36 to download that sdist (the default where the recipe pins one: "
            "source.sdist), or git to clone the recipe's repo@ref (only when asked; needs the network).",
        ),
    ] = None,
    artifact_name: Annotated[
        str | None,
        typer.Option("--name", help="Artifact name (prefix for a multi-product build; default NAME-TARGET)."),
    ] = None,
    workdir: Annotated[
        Path | None,
        typer.Option(
            "--workdir",
            help="Build folder for recipes that are not cached (default ~/.edgelab/builds/NAME/TARGET).",
        ),
    ] = None,
    cuda_arch: Annotated[
        str | None,
        typer.Option(
            "--cuda-arch", help="GPU architecture a CUDA target compiles for (90 for sm_90, 120 ...)."
        ),
    ] = None,
    for_device: Annotated[
        str | None,
        typer.Option(
            "--for-device", help="Take the build options (the GPU architecture) from this device's facts."
        ),
    ] = None,
    folder: DirOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run the recipe where its toolchain is present and register the result with provenance.

    A recipe that builds a source tree (llama.cpp) is built once per (source hash, target, flags, patches, toolchain file) into the build cache ($EDGELAB_CACHE, default ~/.cache/edgelab) and reused after; each product's header is checked against the target and it becomes a runtime artifact (llama.cpp-linux-aarch64-llama-server, ...). Cross targets use the compiler the recipe names (`edgelab runtime show llama.cpp` says what is missing and the apt-get line); targets whose toolchain no registry here has are refused with that reason.

    \b
      edgelab runtime build llama.cpp --target linux-aarch64      # Jetson/ARM Linux, static, qemu runs it here
      edgelab runtime build llama.cpp --target android-arm64      # a static aarch64 executable for /data/local/tmp
      edgelab runtime build llama.cpp --target windows-x64        # mingw-w64, .exe files (wine runs them here)
      edgelab runtime build llama.cpp --target linux-x86_64 --source llama_cpp_python-0.3.36.tar.gz
    """
    from edgelab.artifacts.manifest import to_manifest
    from edgelab.config import state_dir
    from edgelab.runtimes.build import build_runtime, ensure_build, register_build
    from edgelab.store.db import get_engine, session_scope

    specs = _load(folder)
    if name not in specs:
        fail_from(ConfigError(f"no runtime {name!r}", remedy=f"known: {', '.join(sorted(specs))}"), code=2)
    spec = specs[name]
    recipe = spec.targets.get(target)
    if recipe is None:
        fail_from(
            ConfigError(
                f"runtime {name} has no recipe for {target}",
                remedy=f"targets: {', '.join(sorted(spec.targets))}",
            ),
            code=2,
        )
    if source is not None and not recipe.fetches_source:
        fail_from(
            ConfigError(
                f"{name} {target}: this recipe fetches its own source; --source does not apply",
                remedy="drop --source",
            ),
            code=2,
        )

    def progress(line: str) -> None:
        err_console.print(f"[dim]{escape(line)}[/]", soft_wrap=True)

    engine = get_engine(state.db)
    options: dict[str, str] = {}
    if for_device is not None:
        options.update(_device_options(engine, for_device))
    if cuda_arch is not None:
        options["cuda_arch"] = "".join(ch for ch in cuda_arch if ch.isdigit())
    with session_scope(engine) as s:
        if recipe.fetches_source:
            built = ensure_build(spec, target, source=source, progress=progress, options=options)
            arts = register_build(s, spec, built, prefix=artifact_name)
            data = {
                "build_key": built.key,
                "folder": str(built.folder),
                "reused": built.reused,
                "build": built.manifest,
                "artifacts": [to_manifest(s, a) for a in arts],
            }
        else:
            wd = workdir or state_dir() / "builds" / name / target
            art = build_runtime(
                s,
                spec,
                target,
                wd,
                name=artifact_name,
                log=lambda line: err_console.print(f"[dim]$ {escape(line)}[/]"),
            )
            data = to_manifest(s, art)
    if as_json:
        print_json(data)
        return
    if "artifacts" not in data:
        console.print(
            f"built and registered [bold]{escape(data['name'])}[/] {data['digest'][:16]} ({len(data['files'])} files)"
        )
        for k, v in data["metadata"]["provenance"].items():
            console.print(f"  {k}: {escape(str(v))}")
        return
    m = data["build"]
    verb = "reused the cached build" if data["reused"] else f"built in {m.get('build_seconds')} s"
    console.print(f"{verb} [bold]{escape(data['build_key'])}[/]  {escape(data['folder'])}")
    console.print(f"  source {escape(str(m.get('source')))}  commit {escape(str(m.get('source_commit')))}")
    console.print(f"  source sha256 {m.get('source_sha256')}  needs {escape(str(m.get('isa') or 'any CPU'))}")
    for a in data["artifacts"]:
        console.print(f"  registered [bold]{escape(a['name'])}[/] {a['digest'][:16]}")


@app.command("install")
def install(
    name: str,
    device: Annotated[str, typer.Option("--device", "-d", help="Device to install it on.")],
    pip_arg: Annotated[
        list[str] | None,
        typer.Option(
            "--pip-arg",
            help="Given to every pip call on the device instead of the recipe's (its extra index), e.g. "
            "--pip-arg=--find-links=DIR: a folder of wheels there (the CPU torch).",
        ),
    ] = None,
    lease: LeaseOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Install a pip runtime's pinned pair into a virtual environment on the device (vllm-omni: S1).

    Pushes the build's wheels for the device's target (made first when none is registered), creates
    ~/.edgelab/venvs/NAME-VERSION there, installs them with their dependencies, applies the recipe's
    fix-ups and checks the imports; the venv's stamp is what `edgelab probe` then reports.

    \b
      edgelab runtime install vllm-omni --device wsl-hx370
      edgelab runtime install vllm-omni --device wsl-hx370 --pip-arg=--find-links=/opt/wheels
      edgelab probe wsl-hx370 && edgelab facts wsl-hx370     # software: vllm, vllm_omni, torch_build ...
    """
    from edgelab.deploy.venv_install import install as run_install
    from edgelab.store.db import get_engine

    def progress(line: str) -> None:
        err_console.print(f"[dim]{escape(line)}[/]", soft_wrap=True)

    stamp = run_install(
        get_engine(state.db),
        device,
        name,
        progress=progress,
        lease_id=lease,
        pip_args=list(pip_arg) if pip_arg else None,
    )
    if as_json:
        print_json(stamp)
        return
    pk = stamp.get("packages") or {}
    console.print(
        f"installed [bold]{escape(name)}[/] on {escape(device)} in {stamp.get('venv')} "
        f"({stamp.get('install_seconds')} s, check {stamp.get('check_seconds')} s)"
    )
    console.print(
        "  "
        + ", ".join(f"{k} {v}" for k, v in sorted(pk.items()))
        + f"; torch build {stamp.get('torch_build')}"
    )
    for mod, res in (stamp.get("imports") or {}).items():
        console.print(f"  import {mod}: {escape(str(res))}", highlight=False)
    omni = stamp.get("omni") or {}
    if omni:
        console.print(
            f"  vLLM-Omni platform {omni.get('platform')}, AR worker {omni.get('ar_worker') or omni.get('error')}"
        )
    for f in stamp.get("fixups") or []:
        if f.get("error"):
            console.print(f"  fix-up {f['fixup']}: {escape(str(f.get('action')))}", highlight=False)
