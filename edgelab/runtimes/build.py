"""Run a runtime's recipe for one target where its toolchain is present; register what it made.

Builds run on the lab host (cross-compiling for devices). Before anything runs, every tool the
recipe names is checked, and a missing one is reported exactly (which tool, what to install or set).
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from sqlmodel import Session

from edgelab.artifacts.hashing import sha256_path
from edgelab.artifacts.registry import add_artifact
from edgelab.errors import BuildError, NotFound, SourceError
from edgelab.metrics.provenance import git_state
from edgelab.runtimes import toolchains
from edgelab.runtimes.cache import (
    build_dir,
    build_key,
    cache_root,
    ccache_env,
    locked,
    read_manifest,
    write_manifest,
)
from edgelab.runtimes.patches import load_patches, patched_tree
from edgelab.runtimes.source import GIT_SOURCE, PYPI_PREFIX, resolve_source
from edgelab.runtimes.spec import RuntimeSpec, TargetRecipe
from edgelab.store.artifacts import Artifact


@dataclass(frozen=True)
class Missing:
    tool: str
    detail: str
    remedy: str

    def __str__(self) -> str:
        return f"{self.tool}: {self.detail} ({self.remedy})"


_ARCH = {"x86_64": "x86_64", "amd64": "x86_64", "x64": "x86_64", "aarch64": "aarch64", "arm64": "aarch64"}


def host_platform() -> tuple[str, str]:
    """(os, arch) of this lab host, in target words: ("linux", "x86_64")."""
    return platform.system().lower(), _ARCH.get(platform.machine().lower(), platform.machine().lower())


def _native_host_needed(recipe: TargetRecipe) -> tuple[str, str] | None:
    """The (os, arch) a recipe must run on, or None when it cross-builds or is architecture-free.

    A recipe without a cross toolchain (CMAKE_TOOLCHAIN_FILE, pip --platform) builds for the host;
    run elsewhere it would produce a binary for the wrong machine under the right name.
    """
    if set(recipe.toolchain) <= {"python3"}:
        return None  # pure Python: runs anywhere
    flags = " ".join(recipe.flags)
    if any(k in flags for k in ("CMAKE_TOOLCHAIN_FILE", "CMAKE_SYSTEM_NAME", "--platform")):
        return None
    os_name, _, rest = recipe.target.partition("-")
    return os_name, _ARCH.get(rest.split("-")[0], rest.split("-")[0])


def check_toolchain(recipe: TargetRecipe, host: tuple[str, str] | None = None) -> list[Missing]:
    """Every tool the recipe needs that this host lacks (empty: the recipe can run)."""
    missing = []
    need = _native_host_needed(recipe)
    here = host or host_platform()
    if need is not None and need != here:
        missing.append(
            Missing(
                "host",
                f"{recipe.target} builds natively on a {need[0]} {need[1]} host; this one is {here[0]} {here[1]}",
                "run the build on such a host (e.g. the device itself), or add a cross toolchain file to the recipe",
            )
        )
    for tool in recipe.toolchain:
        present, why = toolchains.find(tool)
        if not present:
            missing.append(Missing(tool, why, toolchains.install_line(tool)))
    return missing


def _version(tool: str) -> str:
    return toolchains.version(tool)


def _git_state(path: Path) -> str | None:
    """``<commit>`` or ``<commit>-dirty`` of a git checkout (``provenance.git_state``), else None."""
    state = git_state(path)
    if state is None:
        return None
    return state["commit"] + ("-dirty" if state["dirty"] else "")


def _label(step: tuple[str, ...] | list[str]) -> str:
    """A step's name for progress lines and errors: configure, build, copy, or the program."""
    if step[:1] == ("cmake",) or list(step[:1]) == ["cmake"]:
        if "-S" in step or "-B" in step:
            return "configure"
        if "--build" in step:
            return "build"
        if "-E" in step:
            return "copy"
    return Path(step[0]).name if step else "step"


def _expand(
    step: tuple[str, ...], recipe: TargetRecipe, values: dict[str, str], launcher: list[str]
) -> list[str]:
    expanded: list[str] = []
    for raw in step:  # "{flags}" / "{launcher}" alone expand to several arguments (or none)
        if raw == "{flags}":
            expanded.extend(f.format(**values) for f in recipe.flags)
        elif raw == "{launcher}":
            expanded.extend(launcher)
        else:
            expanded.append(raw.format(**values))
    return expanded


def _tail(logfile: Path, lines: int = 25) -> str:
    try:
        text = logfile.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


_NINJA = re.compile(r"^\[(\d+)/(\d+)\]")


def _run_step(argv: list[str], label: str, cwd: Path, env: dict[str, str], logf, progress) -> int:
    """Run one step with its output in the log; ninja's ``[n/m]`` lines become progress lines
    (every 10 % or 20 s), so a long build shows it is alive."""
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        bufsize=1,
    )
    last_t, last_pct = time.monotonic(), -10
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            logf.write(line)
            m = _NINJA.match(line)
            if m and progress:
                done, total = int(m.group(1)), int(m.group(2))
                pct = 100 * done // max(total, 1)
                now = time.monotonic()
                if pct >= last_pct + 10 or now - last_t >= 20 or done == total:
                    progress(f"{label}: {done}/{total} ({pct} %)")
                    last_t, last_pct = now, pct
    except BaseException:  # Ctrl-C, a closed console: the compiler must not outlive the build
        proc.kill()
        proc.wait()
        raise
    finally:
        logf.flush()
    return proc.wait()


def _run_steps(
    recipe: TargetRecipe,
    spec: RuntimeSpec,
    values: dict[str, str],
    cwd: Path,
    logfile: Path,
    env: dict[str, str],
    launcher: list[str],
    progress=None,
) -> None:
    n = len(recipe.steps)
    with open(logfile, "w") as logf:
        for i, step in enumerate(recipe.steps, 1):
            argv = _expand(step, recipe, values, launcher)
            label = _label(step)
            if progress:
                progress(f"step {i}/{n} {label}: {' '.join(argv)[:160]}")
            logf.write("$ " + " ".join(argv) + "\n")
            logf.flush()
            t0 = time.monotonic()
            try:
                rc = _run_step(argv, label, cwd, env, logf, progress)
            except OSError as err:
                raise BuildError(
                    f"{spec.name} {recipe.target}: step {i}/{n} {label} could not start: {err}",
                    remedy=f"see {logfile}",
                ) from err
            if rc != 0:
                raise BuildError(
                    f"{spec.name} {recipe.target}: step {i}/{n} {label} exited {rc}; "
                    f"the log ends:\n{_tail(logfile)}",
                    remedy=f"full log: {logfile}",
                )
            if progress:
                progress(f"step {i}/{n} {label}: done in {time.monotonic() - t0:.0f} s")


def _forget_other_checkout(build: Path, source: str, progress=None) -> None:
    """An interrupted build configured from another checkout (a worktree, a moved clone) keeps its
    objects but not its CMake cache: CMake refuses a cache made for another source folder, and the
    cache names that checkout's toolchain file too. Ninja then rebuilds from ccache."""
    cache = build / "CMakeCache.txt"
    try:
        text = cache.read_text(errors="replace")
    except OSError:
        return
    home = next(
        (ln.split("=", 1)[1] for ln in text.splitlines() if ln.startswith("CMAKE_HOME_DIRECTORY:")), None
    )
    if home is None or Path(home).resolve() == Path(source).resolve():
        return
    if progress:
        progress(f"the interrupted build was configured from {home}: configuring again from {source}")
    cache.unlink()
    shutil.rmtree(build / "CMakeFiles", ignore_errors=True)


def _values(
    spec: RuntimeSpec, recipe: TargetRecipe, src: Path, build: Path, out: Path, project: Path | None = None
) -> dict[str, str]:
    return {
        "project": str(project or ""),
        "src": str(src),
        "build": str(build),
        "out": str(out),
        "python": sys.executable,
        "ndk": toolchains.ndk_home()[0] or "",
        "toolchains": str(toolchains.TOOLCHAINS_DIR),
        "repo": spec.repo or "",
        "ref": spec.ref or "",
        "flags": " ".join(recipe.flags),
        "launcher": "",
    }


def _recipe(spec: RuntimeSpec, target: str) -> TargetRecipe:
    recipe = spec.targets.get(target)
    if recipe is None:
        raise NotFound(
            f"runtime {spec.name} has no recipe for {target}",
            remedy=f"targets: {', '.join(sorted(spec.targets))}",
        )
    missing = check_toolchain(recipe)
    if missing:
        raise BuildError(
            f"cannot build {spec.name} for {target}: missing " + "; ".join(str(m) for m in missing),
            remedy="install what is listed (or build on a host that has it), then run the build again",
        )
    return recipe


def toolchain_files(recipe: TargetRecipe) -> dict[str, str]:
    """The toolchain files (``{toolchains}/NAME.cmake``) a recipe's flags name, by SHA-256: part of
    what was built, so a changed file makes a new build."""
    import hashlib

    out = {}
    for flag in recipe.flags:
        for name in re.findall(r"\{toolchains\}/([A-Za-z0-9_.-]+)", flag):
            path = toolchains.TOOLCHAINS_DIR / name
            if not path.is_file():
                raise BuildError(
                    f"{recipe.target}: toolchain file {name} does not exist ({path})",
                    remedy="restore the file or fix the recipe's flags",
                )
            out[name] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def compiler_launcher() -> list[str]:
    """ccache as CMake's compiler launcher when it is on PATH (rebuilds become cheap)."""
    exe = shutil.which("ccache")
    return [f"-DCMAKE_C_COMPILER_LAUNCHER={exe}", f"-DCMAKE_CXX_COMPILER_LAUNCHER={exe}"] if exe else []


def build_runtime(
    session: Session, spec: RuntimeSpec, target: str, workdir: Path, *, name: str | None = None, log=None
) -> Artifact:
    """Run ``spec``'s recipe for ``target`` in ``workdir`` and register its output as a runtime artifact.

    For recipes that fetch their own source or need none (pip downloads, the reference zipapp);
    a recipe that builds a fetched source tree goes through :func:`ensure_build` instead.
    """
    recipe = _recipe(spec, target)
    workdir = Path(workdir).resolve()
    src, build, out = workdir / "src", workdir / "build", workdir / "out"
    for d in (build, out):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    values = _values(spec, recipe, src, build, out)
    logfile = workdir / "build.log"
    env = {**os.environ, "PYTHONPATH": _pythonpath()}
    _run_steps(recipe, spec, values, workdir, logfile, env, [], log)
    produced = _products(spec, recipe, out, values, logfile)
    commit = _git_state(src) if (src / ".git").exists() else None
    if spec.extra.get("local"):
        commit = _git_state(Path(__file__).resolve().parents[2]) or "unknown"
    provenance = {
        "source_repo": spec.repo or spec.pip or spec.extra.get("local"),
        "source_commit": commit or spec.ref,
        "build_flags": " ".join(recipe.flags),
        "toolchain": "; ".join(_version(t) for t in recipe.toolchain),
        "recipe": f"{spec.file} ({recipe.where})",
        "built_on": f"{platform.node()} {platform.system()} {platform.machine()}",
    }
    return add_artifact(
        session,
        name or f"{spec.name}-{target}",
        list(produced.values()),
        kind="runtime",
        target=target,
        component=spec.name,
        provenance=provenance,
        meta={"runtime": spec.name},
        replace=True,
    )


def _products(
    spec: RuntimeSpec, recipe: TargetRecipe, out: Path, values: dict[str, str], logfile: Path
) -> dict[str, Path]:
    produced = {}
    for rel in recipe.produces:
        p = out / rel.format(**values)
        if not p.is_file():
            raise BuildError(
                f"{spec.name} {recipe.target}: the build did not produce {rel}",
                remedy=f"see {logfile}; the log ends:\n{_tail(logfile, 10)}",
            )
        produced[Path(rel).name] = p
    return produced


def check_binaries(spec: RuntimeSpec, target: str, produced: dict[str, Path]) -> dict[str, dict]:
    """Each product's header (ELF/PE, machine, static), checked against the target: a cross build
    that made a host binary is an error here, never a runtime artifact under the wrong target."""
    from edgelab.runtimes import binfmt

    out = {}
    for name, path in produced.items():
        b = binfmt.read(path)
        if b.format == "other":
            continue  # a data file or a script: no machine to check
        why = binfmt.mismatch(b, target)
        if why:
            raise BuildError(
                f"{spec.name} {target}: {name} {why}",
                remedy="check the recipe's toolchain file and compiler (the build used the wrong one)",
            )
        out[name] = b.to_dict()
    return out


@dataclass(frozen=True)
class CachedBuild:
    """A finished build in the cache: its key, folder, products (name -> path) and record."""

    key: str
    folder: Path
    products: dict[str, Path]
    manifest: dict
    reused: bool

    @property
    def bin_dir(self) -> Path:
        return self.folder / "out"


def ensure_build(
    spec: RuntimeSpec,
    target: str,
    *,
    source: str | Path | None = None,
    root: Path | None = None,
    progress=None,
    options: dict[str, str] | None = None,
) -> CachedBuild:
    """Build ``spec`` for ``target`` from ``source`` (see edgelab.runtimes.source.resolve_source)
    once per (source hash, target, flags) into the cache, or return the build already there.
    ``options`` fill the recipe's build options (``{cuda_arch}``) before the build is keyed."""
    recipe = _recipe(spec, target)
    lacking = sorted(recipe.options - set(options or {}))
    if lacking:
        raise BuildError(
            f"{spec.name} {target} needs {', '.join(lacking)}: the GPU architecture to compile for",
            remedy="give --cuda-arch (90 for sm_90), or --for-device DEVICE to take it from the device's facts",
        )
    recipe = recipe.with_options(options or {})
    if not recipe.fetches_source:
        raise BuildError(
            f"{spec.name} {target}: this recipe fetches or needs no source tree; it is not cached",
            remedy="build it with build_runtime (edgelab runtime build without --source)",
        )
    root = Path(root) if root else cache_root()
    if source is None and spec.sdist:
        source = PYPI_PREFIX + spec.sdist  # the pinned sdist that vendors the tree: no git clone
    elif source is None:
        raise SourceError(
            f"{spec.name}: no source given, and the recipe pins no sdist that vendors it",
            remedy=f"--source FOLDER or ARCHIVE of {spec.repo or spec.name} at {spec.ref or 'its pinned ref'}, "
            "or --source git to clone the recipe's repo@ref (needs the network)",
        )
    elif str(source) == GIT_SOURCE:
        source = None  # asked for: the recipe's repo@ref, cloned
    src = resolve_source(spec.name, source, repo=spec.repo, ref=spec.ref, root=root)
    patches = load_patches(recipe.patches, spec.file)
    project, project_key = _project(spec, recipe)
    files = toolchain_files(recipe)
    key = build_key(
        spec.name,
        src.tree_sha256,
        target,
        recipe.flags,
        [p.sha256 for p in patches],
        [f"{name}:{sha}" for name, sha in files.items()],
        project_key,
    )
    folder = build_dir(key, root)
    with locked(folder.with_name(folder.name + ".lock")):
        manifest = read_manifest(folder)
        if manifest is not None:
            if progress:
                progress(f"reusing the cached build {key} ({folder})")
            return CachedBuild(
                key, folder, {n: folder / r for n, r in manifest["products"].items()}, manifest, True
            )
        build, out = folder / "build", folder / "out"
        build.mkdir(parents=True, exist_ok=True)  # kept from an interrupted build: ninja resumes
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        if progress:
            progress(
                f"building {spec.name} for {target} from {src.origin} (commit {src.commit or 'unknown'}) "
                f"into {folder}"
            )
        tree = patched_tree(src.tree, patches, folder / "src") if patches else src.tree
        values = _values(spec, recipe, tree, build, out, project)
        _forget_other_checkout(build, values["project"] or values["src"], progress)
        launcher = compiler_launcher()
        env = ccache_env(root)
        t0 = time.time()
        _run_steps(recipe, spec, values, folder, folder / "build.log", env, launcher, progress)
        produced = _products(spec, recipe, out, values, folder / "build.log")
        binaries = check_binaries(spec, target, produced)
        manifest = {
            "runtime": spec.name,
            "target": target,
            "build_key": key,
            **src.provenance(),
            "flags": list(recipe.flags),
            "patches": [p.record() for p in patches],
            "toolchain_files": [{"file": n, "sha256": h} for n, h in files.items()],
            "notes": list(recipe.notes),
            **(
                {"project": {"path": recipe.project, "tree_sha256": project_key["tree_sha256"]}}
                if project_key
                else {}
            ),
            "compiler_launcher": "ccache" if launcher else None,
            "isa": recipe.isa,
            "products": {n: p.relative_to(folder).as_posix() for n, p in produced.items()},
            "binaries": binaries,
            "toolchain": "; ".join(_version(t) for t in recipe.toolchain),
            "recipe": f"{spec.file} ({recipe.where})",
            "built_on": f"{platform.node()} {platform.system()} {platform.machine()}",
            "built_at": t0,
            "build_seconds": round(time.time() - t0, 1),
        }
        write_manifest(folder, manifest)
        return CachedBuild(key, folder, produced, manifest, False)


def _code_sha256(folder: Path) -> str:
    """A project folder's hash over what it builds from: every file but its documentation (*.md),
    so a README edit does not make a new build."""
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file() and p.suffix != ".md":
            h.update(f"{p.relative_to(folder).as_posix()}\0{sha256_path(p)}\n".encode())
    return h.hexdigest()


def _project(spec: RuntimeSpec, recipe: TargetRecipe) -> tuple[Path | None, dict | None]:
    """The recipe's project folder (edgelab's own programs built with the source) and what of it keys
    the build: its files' hash, the steps and the products, so editing the controller rebuilds."""
    if not recipe.project:
        return None, None
    folder = (Path(spec.file).parent / recipe.project).resolve()
    return folder, {
        "tree_sha256": _code_sha256(folder),
        "steps": [list(s) for s in recipe.steps],
        "produces": list(recipe.produces),
    }


def register_build(
    session: Session, spec: RuntimeSpec, build: CachedBuild, *, prefix: str | None = None
) -> list[Artifact]:
    """One ``kind: runtime`` artifact per product (``llama.cpp-linux-x86_64-llama-server``), with the
    build's key, source commit and hash, flags and instruction-set level in its metadata."""
    m = build.manifest
    prefix = prefix or f"{spec.name}-{m['target']}"
    provenance = {
        "source_repo": m.get("source"),
        "source_commit": m.get("source_commit"),
        "source_sha256": m.get("source_sha256"),
        "build_key": build.key,
        "build_flags": " ".join(m.get("flags") or []),
        "toolchain": m.get("toolchain"),
        "recipe": m.get("recipe"),
        "built_on": m.get("built_on"),
    }
    arts = []
    for product, path in sorted(build.products.items()):
        meta = {
            "runtime": spec.name,
            "product": product,
            "target": m["target"],
            "source_commit": m.get("source_commit"),
            "source_sha256": m.get("source_sha256"),
            "build_key": build.key,
            "flags": list(m.get("flags") or []),
            "isa": m.get("isa"),
            "binary": (m.get("binaries") or {}).get(product) or _binary(path),
            "cuda_archs": cuda_archs(m.get("flags") or []),
            "notes": list(m.get("notes") or []),
        }
        arts.append(
            add_artifact(
                session,
                f"{prefix}-{product}",
                [path],
                kind="runtime",
                target=m["target"],
                component=spec.name,
                provenance=provenance,
                meta=meta,
                replace=True,
            )
        )
    return arts


def cuda_archs(flags) -> list[str]:
    """The GPU architectures a CUDA build holds code for (``-DCMAKE_CUDA_ARCHITECTURES=87-real``)."""
    for f in flags:
        if f.startswith("-DCMAKE_CUDA_ARCHITECTURES="):
            return [a for a in f.split("=", 1)[1].replace(",", ";").split(";") if a and "{" not in a]
    return []


def _binary(path: Path) -> dict | None:
    """A product's header, read now (a build cached before builds recorded it)."""
    from edgelab.runtimes import binfmt

    b = binfmt.read(path)
    return None if b.format == "other" else b.to_dict()


def _pythonpath() -> str:
    root = str(Path(__file__).resolve().parents[2])
    old = os.environ.get("PYTHONPATH")
    return root + (os.pathsep + old if old else "")


__all__ = [
    "BuildError",
    "CachedBuild",
    "Missing",
    "build_runtime",
    "check_toolchain",
    "ensure_build",
    "register_build",
]
