"""Run a runtime's recipe for one target where its toolchain is present; register what it made.

Builds run on the lab host (cross-compiling for devices). Before anything runs, every tool the
recipe names is checked, and a missing one is reported exactly (which tool, what to install or set).
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from sqlmodel import Session

from edgelab.artifacts.registry import add_artifact
from edgelab.errors import EdgelabError, NotFound
from edgelab.runtimes.spec import RuntimeSpec, TargetRecipe
from edgelab.store.artifacts import Artifact

REMEDIES = {
    "cmake": "install CMake >= 3.22 (apt-get install cmake, or pip install cmake)",
    "ninja": "install Ninja (apt-get install ninja-build, or pip install ninja)",
    "nvcc": "install the CUDA toolkit and put nvcc on PATH (JetPack ships it in /usr/local/cuda/bin)",
    "android-ndk": "install the Android NDK (r26+) and set ANDROID_NDK_HOME to its folder",
    "pip": "install pip for this Python (python3 -m ensurepip)",
    "python3": "install Python 3.10+",
    "git": "install git",
    "make": "install make (apt-get install build-essential)",
}


class BuildError(EdgelabError):
    """A recipe that could not run, or a step that failed."""


@dataclass(frozen=True)
class Missing:
    tool: str
    detail: str
    remedy: str

    def __str__(self) -> str:
        return f"{self.tool}: {self.detail} ({self.remedy})"


def _ndk() -> tuple[str | None, str]:
    home = os.environ.get("ANDROID_NDK_HOME") or os.environ.get("ANDROID_NDK_ROOT")
    if not home:
        return None, "ANDROID_NDK_HOME is not set"
    chain = Path(home) / "build" / "cmake" / "android.toolchain.cmake"
    if not chain.is_file():
        return None, f"ANDROID_NDK_HOME={home} has no build/cmake/android.toolchain.cmake"
    return home, ""


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
    if "CMAKE_TOOLCHAIN_FILE" in flags or "--platform" in flags:
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
        if tool == "android-ndk":
            home, why = _ndk()
            if home is None:
                missing.append(Missing(tool, why, REMEDIES[tool]))
        elif tool == "pip":
            ok = (
                subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode
                == 0
            )
            if not ok:
                missing.append(Missing(tool, f"{sys.executable} -m pip does not run", REMEDIES[tool]))
        elif tool == "python3":
            continue  # this very interpreter
        elif shutil.which(tool) is None:
            missing.append(Missing(tool, "not found on PATH", REMEDIES.get(tool, f"install {tool}")))
    return missing


def _version(tool: str) -> str:
    if tool == "python3":
        return f"python {platform.python_version()}"
    if tool == "android-ndk":
        home, _ = _ndk()
        props = Path(home or "") / "source.properties"
        if props.is_file():
            for line in props.read_text().splitlines():
                if line.startswith("Pkg.Revision"):
                    return f"android-ndk {line.split('=', 1)[1].strip()}"
        return f"android-ndk {home}"
    exe = [sys.executable, "-m", "pip"] if tool == "pip" else [tool]
    try:
        res = subprocess.run([*exe, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return tool
    lines = (res.stdout or res.stderr).strip().splitlines()
    return lines[-1] if tool == "nvcc" and lines else (lines[0] if lines else tool)


def _git_state(path: Path) -> str | None:
    try:
        head = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=30
        )
        if head.returncode != 0:
            return None
        dirty = subprocess.run(
            ["git", "-C", str(path), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return head.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.TimeoutExpired):
        return None


def build_runtime(
    session: Session, spec: RuntimeSpec, target: str, workdir: Path, *, name: str | None = None, log=None
) -> Artifact:
    """Run ``spec``'s recipe for ``target`` in ``workdir`` and register its output as a runtime artifact."""
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
    workdir = Path(workdir).resolve()
    src, build, out = workdir / "src", workdir / "build", workdir / "out"
    for d in (build, out):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    values = {
        "src": str(src),
        "build": str(build),
        "out": str(out),
        "python": sys.executable,
        "ndk": _ndk()[0] or "",
        "repo": spec.repo or "",
        "ref": spec.ref or "",
        "flags": " ".join(recipe.flags),
    }
    logfile = workdir / "build.log"
    with open(logfile, "w") as logf:
        for step in recipe.steps:
            expanded: list[str] = []
            for raw in step:  # "{flags}" alone expands to the recipe's flags, one argument each
                expanded.extend(recipe.flags if raw == "{flags}" else [raw.format(**values)])
            if log:
                log(" ".join(expanded))
            logf.write("$ " + " ".join(expanded) + "\n")
            logf.flush()
            res = subprocess.run(
                expanded,
                cwd=workdir,
                stdout=logf,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": _pythonpath()},
            )
            if res.returncode != 0:
                raise BuildError(
                    f"{spec.name} {target}: step `{' '.join(expanded)[:200]}` exited {res.returncode}",
                    remedy=f"see {logfile}",
                )
    produced = []
    for rel in recipe.produces:
        p = out / rel.format(**values)
        if not p.is_file():
            raise BuildError(
                f"{spec.name} {target}: the build did not produce {rel}", remedy=f"see {logfile}"
            )
        produced.append(p)
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
        produced,
        kind="runtime",
        target=target,
        component=spec.name,
        provenance=provenance,
        meta={"runtime": spec.name},
        replace=True,
    )


def _pythonpath() -> str:
    root = str(Path(__file__).resolve().parents[2])
    old = os.environ.get("PYTHONPATH")
    return root + (os.pathsep + old if old else "")


__all__ = ["BuildError", "Missing", "build_runtime", "check_toolchain"]
