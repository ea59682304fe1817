"""Where a runtime's source tree comes from: the recipe's git ref, a local folder, or an archive.

With no network the llama-cpp-python sdist on PyPI is a way in: it vendors the whole llama.cpp
tree (``vendor/llama.cpp``) and even ships the submodule's git metadata, so the exact upstream
commit is known. Every source is identified by a SHA-256 (of the archive file, or of the tree's
files for a folder or a checkout) and by the commit read from the tree. The build cache is keyed
by the tree's hash, so an archive and the same tree unpacked by hand share one build.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from edgelab.artifacts.hashing import sha256_path
from edgelab.errors import SourceError
from edgelab.runtimes.cache import cache_root, locked

_SHA = re.compile(r"^[0-9a-f]{40}$")
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar.xz", ".tar.bz2", ".tar", ".zip")
PYPI_PREFIX = "pypi:"
GIT_SOURCE = "git"  # --source git: clone the recipe's repo@ref (only when asked)


@dataclass(frozen=True)
class Source:
    """A source tree ready to build: ``tree`` holds the top CMakeLists.txt."""

    tree: Path
    sha256: str  # the archive's, or the tree's for a folder or a checkout
    tree_sha256: str  # the built tree's contents (tree_sha256()): what keys the build cache
    commit: str | None  # upstream commit, read from the tree's git metadata (or the sdist's notes)
    origin: str  # what the operator named: URL@ref, folder, archive path
    kind: str  # git | dir | archive

    def provenance(self) -> dict[str, str | None]:
        return {
            "source": self.origin,
            "source_kind": self.kind,
            "source_sha256": self.sha256,
            "source_tree_sha256": self.tree_sha256,
            "source_commit": self.commit,
        }


def tree_sha256(tree: Path) -> str:
    """A hash of a folder's contents: every file's relative path, executable bit and SHA-256
    (links by their target), sorted; ``.git`` is left out (a checkout and its export agree)."""
    h = hashlib.sha256()
    entries = []
    for dirpath, dirnames, filenames in os.walk(tree):
        dirnames[:] = sorted(d for d in dirnames if d != ".git")
        for name in filenames:
            if name == ".git":
                continue
            p = Path(dirpath) / name
            entries.append((p.relative_to(tree).as_posix(), p))
    for rel, p in sorted(entries):
        if p.is_symlink():
            digest, mode = "link:" + os.readlink(p), "l"
        else:
            digest, mode = sha256_path(p), "x" if os.access(p, os.X_OK) else "f"
        h.update(f"{rel}\0{mode}\0{digest}\n".encode())
    return h.hexdigest()


def _git_dir(tree: Path) -> Path | None:
    dotgit = tree / ".git"
    if dotgit.is_dir():
        return dotgit
    if dotgit.is_file():  # a submodule's gitlink: "gitdir: ../../.git/modules/vendor/llama.cpp"
        m = re.match(r"gitdir:\s*(.+)", dotgit.read_text().strip())
        if m:
            d = (tree / m.group(1).strip()).resolve()
            return d if d.is_dir() else None
    return None


def read_commit(tree: Path) -> str | None:
    """The commit a tree was checked out at, from its git metadata (no git binary needed)."""
    gd = _git_dir(tree)
    if gd is None:
        return None
    head = (gd / "HEAD").read_text().strip() if (gd / "HEAD").is_file() else ""
    if _SHA.match(head):
        return head
    if head.startswith("ref:"):
        ref = head[4:].strip()
        if (gd / ref).is_file():
            value = (gd / ref).read_text().strip()
            return value if _SHA.match(value) else None
        packed = gd / "packed-refs"
        if packed.is_file():
            for line in packed.read_text().splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[1] == ref and _SHA.match(parts[0]):
                    return parts[0]
    return None


def sdist_commit(tree: Path, runtime: str) -> str | None:
    """For a Python sdist vendoring ``runtime`` (``<sdist>/vendor/<runtime>``) without git
    metadata: the commit its CHANGELOG names for the sdist's own version ("update llama.cpp to
    ggml-org/llama.cpp@0c1e57098"), abbreviated as written there."""
    if tree.parent.name != "vendor":
        return None
    sdist = tree.parent.parent
    version = None
    pkg_info = sdist / "PKG-INFO"
    if pkg_info.is_file():
        m = re.search(r"^Version:\s*(\S+)", pkg_info.read_text(errors="replace"), re.M)
        version = m.group(1) if m else None
    changelog = sdist / "CHANGELOG.md"
    if not version or not changelog.is_file():
        return None
    text = changelog.read_text(errors="replace")
    section = re.search(rf"^## \[{re.escape(version)}\](.*?)(?=^## \[|\Z)", text, re.M | re.S)
    if not section:
        return None
    m = re.search(rf"{re.escape(runtime)}@([0-9a-f]{{7,40}})\b", section.group(1))
    return m.group(1) if m else None


def tree_commit(tree: Path, runtime: str) -> str | None:
    return read_commit(tree) or sdist_commit(tree, runtime)


def find_tree(folder: Path, runtime: str) -> Path:
    """The folder holding the runtime's top CMakeLists.txt: ``folder`` itself, its single
    top-level directory (an unpacked archive), or a Python sdist's ``vendor/<runtime>``."""
    bases = [folder]
    subdirs = (
        [d for d in folder.iterdir() if d.is_dir() and not d.name.startswith(".")] if folder.is_dir() else []
    )
    if len(subdirs) == 1:
        bases.append(subdirs[0])
    for base in bases:  # the vendored tree wins over an sdist's own CMakeLists.txt
        if (base / "vendor" / runtime / "CMakeLists.txt").is_file():
            return base / "vendor" / runtime
    for base in bases:
        if (base / "CMakeLists.txt").is_file():
            return base
    raise SourceError(f"{folder} holds no {runtime} source tree (no CMakeLists.txt, no vendor/{runtime})")


def _unpack(archive: Path, dest: Path) -> None:
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        if archive.name.endswith(".zip"):
            with zipfile.ZipFile(archive) as z:
                for member in z.namelist():
                    target = (tmp / member).resolve()
                    if not target.is_relative_to(tmp.resolve()):
                        raise SourceError(f"{archive}: member {member!r} escapes the archive")
                z.extractall(tmp)
        else:
            with tarfile.open(archive) as t:
                t.extractall(tmp, filter="data")
    except (tarfile.TarError, zipfile.BadZipFile, OSError) as err:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SourceError(f"cannot unpack {archive}: {err}") from err
    os.replace(tmp, dest)


def from_archive(archive: Path, runtime: str, root: Path | None = None) -> Source:
    archive = archive.resolve()
    digest = sha256_path(archive)
    dest = (root or cache_root()) / "sources" / digest[:16]
    with locked(dest.with_name(dest.name + ".lock")):
        if not dest.is_dir():
            _unpack(archive, dest)
    tree = find_tree(dest, runtime)
    return Source(tree, digest, tree_sha256(tree), tree_commit(tree, runtime), str(archive), "archive")


def from_folder(folder: Path, runtime: str) -> Source:
    tree = find_tree(folder.resolve(), runtime)
    digest = tree_sha256(tree)
    return Source(tree, digest, digest, tree_commit(tree, runtime), str(folder.resolve()), "dir")


def from_git(repo: str, ref: str, runtime: str, root: Path | None = None) -> Source:
    """A shallow clone of ``ref`` (a tag or branch) into the cache; reused when present."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{repo.rstrip('/').rsplit('/', 1)[-1]}-{ref}")
    dest = (root or cache_root()) / "sources" / f"git-{slug}"
    with locked(dest.with_name(dest.name + ".lock")):
        if read_commit(dest) is None:
            shutil.rmtree(dest, ignore_errors=True)
            dest.parent.mkdir(parents=True, exist_ok=True)
            res = subprocess.run(
                ["git", "clone", "--quiet", "--depth", "1", "--branch", ref, repo, str(dest)],
                capture_output=True,
                text=True,
                timeout=1800,
            )
            if res.returncode != 0:
                shutil.rmtree(dest, ignore_errors=True)
                tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
                raise SourceError(f"git clone {repo} at {ref} failed: {' / '.join(tail)}")
    tree = find_tree(dest, runtime)
    digest = tree_sha256(tree)
    return Source(tree, digest, digest, read_commit(tree), f"{repo}@{ref}", "git")


def fetch_sdist(requirement: str, dest: Path | None = None) -> Path:
    """``pip download`` one sdist (e.g. ``llama-cpp-python==0.3.36``) into the cache's
    downloads/ folder, or reuse the file already there."""
    dest = dest or cache_root() / "downloads"
    name, _, version = requirement.partition("==")
    stem = re.sub(r"[-_.]+", "_", name.strip().lower())
    with locked(dest / ".lock"):
        have = sorted(dest.glob(f"{stem}-{version or '*'}.tar.gz"))
        if have:
            return have[-1]
        res = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                requirement,
                "-d",
                str(dest),
            ],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        have = sorted(dest.glob(f"{stem}-{version or '*'}.tar.gz"))
        if res.returncode != 0 or not have:
            tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
            raise SourceError(f"pip download {requirement} failed: {' / '.join(tail)}")
        return have[-1]


def resolve_source(
    runtime: str,
    source: str | Path | None,
    *,
    repo: str | None = None,
    ref: str | None = None,
    root: Path | None = None,
) -> Source:
    """``source``: a folder, an archive, ``pypi:REQUIREMENT`` (an sdist that vendors the
    runtime), or None for the recipe's ``repo``@``ref``."""
    if source is None:
        if not (repo and ref):
            raise SourceError(f"{runtime}: the recipe names no git source and no --source was given")
        return from_git(repo, ref, runtime, root)
    text = str(source)
    if text.startswith(PYPI_PREFIX):
        archive = fetch_sdist(text[len(PYPI_PREFIX) :], (root or cache_root()) / "downloads")
        return from_archive(archive, runtime, root)
    path = Path(text).expanduser()
    if path.is_dir():
        return from_folder(path, runtime)
    if path.is_file() and path.name.endswith(ARCHIVE_SUFFIXES):
        return from_archive(path, runtime, root)
    if path.is_file():
        raise SourceError(f"{path} is not a folder or an archive ({', '.join(ARCHIVE_SUFFIXES)})")
    raise SourceError(f"no such source: {path}")


__all__ = [
    "GIT_SOURCE",
    "PYPI_PREFIX",
    "Source",
    "SourceError",
    "fetch_sdist",
    "find_tree",
    "read_commit",
    "sdist_commit",
    "resolve_source",
    "tree_sha256",
]
