"""Patches a recipe applies to its fetched source before building, and the tree they make.

edgelab carries a patch only for an upstream bug that costs a measurement (a llama.cpp run whose
perf lines are lost at exit reports nothing), each in ``runtimes/patches/<runtime>/`` with its
reason in the file. A patch is part of what was built: its SHA-256 goes into the build-cache key
and the build's manifest, so a patched binary is never mistaken for an upstream one.

The cached source tree is shared by every build, so it is never written: the build gets a copy
made of hard links, in which each file a patch touches is first replaced by a real copy.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from edgelab.errors import BuildError

_TARGET_LINE = re.compile(r"^\+\+\+ (?:b/)?(\S+)", re.MULTILINE)


@dataclass(frozen=True)
class Patch:
    name: str  # as the recipe names it, relative to the runtime file's folder
    path: Path
    sha256: str

    def touched(self) -> list[str]:
        """Paths (relative to the tree) the patch changes, from its ``+++ b/...`` lines."""
        return [p for p in _TARGET_LINE.findall(self.path.read_text()) if p != "/dev/null"]

    def record(self) -> dict[str, str]:
        return {"file": self.name, "sha256": self.sha256}


def load_patches(names: tuple[str, ...], runtime_file: str | Path) -> list[Patch]:
    """The recipe's patches, read from beside its runtime file; a missing one is a BuildError."""
    base = Path(runtime_file).resolve().parent
    out = []
    for name in names:
        path = base / name
        if not path.is_file():
            raise BuildError(
                f"{runtime_file}: patch {name} does not exist ({path})",
                remedy="restore the file or drop it from the recipe's patches list",
            )
        out.append(Patch(name, path, hashlib.sha256(path.read_bytes()).hexdigest()))
    return out


def _linked_copy(src: Path, dest: Path) -> None:
    """``dest`` as a copy of ``src`` made of hard links (a real copy across file systems)."""
    try:
        shutil.copytree(src, dest, symlinks=True, copy_function=os.link)
    except OSError:
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(src, dest, symlinks=True)


def _keep_gitlink(src: Path, dest: Path) -> None:
    """A submodule's ``.git`` file (``gitdir: ../../.git/modules/x``, as the llama-cpp-python sdist
    ships it) points nowhere from the copy; aimed at the original, the build still reads its commit
    (llama.cpp's ``--version`` says which upstream commit the patches were applied to)."""
    link = src / ".git"
    if not link.is_file():
        return
    text = link.read_text(errors="replace").strip()
    if not text.startswith("gitdir:"):
        return
    target = Path(text.split(":", 1)[1].strip())
    if not target.is_absolute():
        target = (src / target).resolve()
    (dest / ".git").unlink()
    (dest / ".git").write_text(f"gitdir: {target}\n")


def patched_tree(src: Path, patches: list[Patch], dest: Path) -> Path:
    """``dest``: the source tree ``src`` with ``patches`` applied in order (``patch -p1``); ``src``
    is left as it was. Made afresh each time (an interrupted one is not trusted)."""
    shutil.rmtree(dest, ignore_errors=True)
    _linked_copy(src, dest)
    _keep_gitlink(src, dest)
    exe = shutil.which("patch")
    if exe is None:
        raise BuildError(
            "the recipe patches its source and `patch` is not on PATH",
            remedy="install GNU patch (apt-get install patch)",
        )
    for p in patches:
        for rel in p.touched():
            f, orig = dest / rel, src / rel
            # break the hard link (the shared source must not change), once: a file an earlier
            # patch already changed is a copy of its own
            if f.is_file() and orig.is_file() and os.path.samefile(f, orig):
                f.unlink()
                shutil.copy2(orig, f)
        res = subprocess.run(
            [
                exe,
                "-p1",
                "--batch",
                "--forward",
                "--no-backup-if-mismatch",
                "-d",
                str(dest),
                "-i",
                str(p.path),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if res.returncode != 0:
            raise BuildError(
                f"patch {p.name} does not apply to this source: {(res.stdout + res.stderr).strip()[-400:]}",
                remedy="the source is not the one the patch was written for; pin the recipe's source "
                "or update the patch",
            )
    return dest


__all__ = ["Patch", "load_patches", "patched_tree"]
