"""The tools a recipe may name, how each is found on this host, and the exact line that installs it.

A recipe lists its toolchain by these names; before any step runs, every one is looked for and a
missing one is reported with its install line (a Debian package, a PyPI package, or why no
registry has it). Cross compilers are tools like any other: ``aarch64-linux-gnu-g++`` makes
static aarch64 ELFs for Jetson, ARM Linux and Android's ``/data/local/tmp``; the mingw-w64
``-posix`` compiler makes Windows x64 executables. Two toolchains are not in any registry this
lab reaches: the Android NDK (OpenCL, Hexagon/QNN, Vulkan backends on a phone link against its
sysroot) and an aarch64 CUDA target tree (Jetson's ``cuda-cross-aarch64``); the recipes that need
them are refused with that reason, never attempted.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

TOOLCHAINS_DIR = Path(__file__).resolve().parents[2] / "runtimes" / "toolchains"


@dataclass(frozen=True)
class Tool:
    name: str
    binary: str | None  # looked up on PATH; None: found by find() below
    install: str  # the line that installs it, or why it cannot be installed here
    version_args: tuple[str, ...] = ("--version",)


TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        Tool("cmake", "cmake", "apt-get install -y cmake (or pip install cmake)"),
        Tool("ninja", "ninja", "apt-get install -y ninja-build (or pip install ninja)"),
        Tool("g++", "g++", "apt-get install -y g++"),
        Tool("patch", "patch", "apt-get install -y patch"),
        Tool("git", "git", "apt-get install -y git"),
        Tool("make", "make", "apt-get install -y make"),
        Tool("python3", None, "install Python 3.10+"),
        Tool("pip", None, "python3 -m ensurepip"),
        Tool(
            "aarch64-linux-gnu-g++",
            "aarch64-linux-gnu-g++",
            "apt-get install -y g++-aarch64-linux-gnu",
        ),
        Tool(
            "x86_64-w64-mingw32-g++-posix",
            "x86_64-w64-mingw32-g++-posix",
            "apt-get install -y g++-mingw-w64-x86-64-posix",
        ),
        Tool(
            "nvcc",
            "nvcc",
            "install the CUDA toolkit and put nvcc on PATH (JetPack ships it in /usr/local/cuda/bin); "
            "no Debian main package carries CUDA 12+",
        ),
        Tool(
            "cublas",
            None,
            "install the CUDA toolkit's cuBLAS (libcublas-dev for the toolkit's version, from NVIDIA's CUDA "
            "repository); the toolkit beside nvcc must have cublas_v2.h and libcublas",
        ),
        Tool(
            "cuda-aarch64",
            None,
            "install NVIDIA's cuda-cross-aarch64 (JetPack's cross toolkit: targets/aarch64-linux beside "
            "nvcc); it is in no registry this lab reaches, so build on the Jetson itself",
        ),
        Tool(
            "glslc",
            "glslc",
            "install the Vulkan SDK's glslc (shaderc); no registry this lab reaches has a glslc package",
        ),
        Tool(
            "vulkan-mingw",
            None,
            "a Vulkan loader import library for mingw-w64 (vulkan-1, from the Vulkan SDK); no registry this "
            "lab reaches has one",
        ),
        Tool(
            "aarch64-w64-mingw32-clang",
            "aarch64-w64-mingw32-clang",
            "install llvm-mingw (aarch64-w64-mingw32-clang); no registry this lab reaches has it",
        ),
        Tool(
            "android-ndk",
            None,
            "install the Android NDK (r26+) and set ANDROID_NDK_HOME to its folder; it is in no registry "
            "this lab reaches",
        ),
    )
}


def cuda_root() -> Path | None:
    """The CUDA toolkit nvcc belongs to (``/usr/local/cuda-13.0``), following links and wrappers."""
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if home and (Path(home) / "bin" / "nvcc").is_file():
        return Path(home).resolve()
    for guess in (Path("/usr/local/cuda"),):
        if (guess / "bin" / "nvcc").is_file():
            return guess.resolve()
    exe = shutil.which("nvcc")
    if exe:
        root = Path(exe).resolve().parent.parent
        if (root / "targets").is_dir():
            return root
    return None


def cuda_targets() -> list[str]:
    """The target trees the CUDA toolkit holds (``x86_64-linux``, ``aarch64-linux``, ``sbsa-linux``)."""
    root = cuda_root()
    if root is None or not (root / "targets").is_dir():
        return []
    return sorted(p.name for p in (root / "targets").iterdir() if p.is_dir())


def ndk_home() -> tuple[str | None, str]:
    home = os.environ.get("ANDROID_NDK_HOME") or os.environ.get("ANDROID_NDK_ROOT")
    if not home:
        return None, "ANDROID_NDK_HOME is not set"
    chain = Path(home) / "build" / "cmake" / "android.toolchain.cmake"
    if not chain.is_file():
        return None, f"ANDROID_NDK_HOME={home} has no build/cmake/android.toolchain.cmake"
    return home, ""


def find(name: str) -> tuple[bool, str]:
    """(present, why not) for one tool."""
    if name == "python3":
        return True, ""
    if name == "pip":
        ok = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True).returncode == 0
        return ok, "" if ok else f"{sys.executable} -m pip does not run"
    if name == "android-ndk":
        home, why = ndk_home()
        return home is not None, why
    if name == "vulkan-mingw":
        libs = [Path("/usr/x86_64-w64-mingw32/lib") / n for n in ("libvulkan-1.a", "libvulkan-1.dll.a")]
        found = any(p.is_file() for p in libs)
        return found, "" if found else "no libvulkan-1 import library under /usr/x86_64-w64-mingw32/lib"
    if name == "cublas":
        root = cuda_root()
        if root is None:
            return False, "no CUDA toolkit (nvcc) on this host"
        heads = [root / "include" / "cublas_v2.h", *root.glob("targets/*/include/cublas_v2.h")]
        if any(h.is_file() for h in heads):
            return True, ""
        return False, f"the CUDA toolkit at {root} has no cublas_v2.h (ggml-cuda links cuBLAS)"
    if name == "cuda-aarch64":
        have = cuda_targets()
        if {"aarch64-linux", "sbsa-linux"} & set(have):
            return True, ""
        root = cuda_root()
        if root is None:
            return False, "no CUDA toolkit (nvcc) on this host"
        return False, f"the CUDA toolkit at {root} has targets {', '.join(have) or 'none'}, no aarch64-linux"
    tool = TOOLS.get(name)
    binary = tool.binary if tool and tool.binary else name
    if shutil.which(binary) is None:
        return False, "not found on PATH"
    return True, ""


def install_line(name: str) -> str:
    tool = TOOLS.get(name)
    return tool.install if tool else f"install {name}"


def version(name: str) -> str:
    """One line naming the tool's version, for the build record."""
    import platform

    if name == "python3":
        return f"python {platform.python_version()}"
    if name == "android-ndk":
        home, _ = ndk_home()
        props = Path(home or "") / "source.properties"
        if props.is_file():
            for line in props.read_text().splitlines():
                if line.startswith("Pkg.Revision"):
                    return f"android-ndk {line.split('=', 1)[1].strip()}"
        return f"android-ndk {home}"
    if name == "cuda-aarch64":
        return f"cuda targets {', '.join(cuda_targets())}"
    tool = TOOLS.get(name)
    exe = [sys.executable, "-m", "pip"] if name == "pip" else [tool.binary if tool and tool.binary else name]
    try:
        res = subprocess.run([*exe, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return name
    lines = (res.stdout or res.stderr).strip().splitlines()
    return lines[-1] if name == "nvcc" and lines else (lines[0] if lines else name)


__all__ = [
    "TOOLCHAINS_DIR",
    "TOOLS",
    "Tool",
    "cuda_root",
    "cuda_targets",
    "find",
    "install_line",
    "ndk_home",
    "version",
]
