"""A recipe's ``project:``: a CMake project of the repository built with the fetched source (how
edgelab's S3 controller is built with llama.cpp), keyed into the build cache with its files."""

from __future__ import annotations

import shutil
import subprocess
import textwrap

import pytest

from edgelab.errors import RuntimeSpecError
from edgelab.runtimes import load_runtimes
from edgelab.runtimes.build import ensure_build
from edgelab.runtimes.cache import MANIFEST, read_manifest
from runtimes.test_runtimes_source_cache import _sdist


def _files(folder, greeting="hi"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "hello.yaml").write_text(
        textwrap.dedent("""\
        name: hello
        source: {repo: https://example.invalid/hello, ref: v1}
        targets:
          linux-x86_64:
            toolchain: [cmake, ninja]
            project: greet
            flags: [-DCMAKE_BUILD_TYPE=Release]
            steps:
              - [cmake, -S, "{project}", -B, "{build}", -G, Ninja, "-DHELLO_SRC={src}", "{flags}", "{launcher}"]
              - [cmake, --build, "{build}", --target, hello, greet]
              - [cmake, -E, copy, "{build}/hello/hello", "{build}/greet", "{out}"]
            produces: [hello, greet]
        """)
    )
    proj = folder / "greet"
    proj.mkdir(exist_ok=True)
    (proj / "CMakeLists.txt").write_text(
        "cmake_minimum_required(VERSION 3.16)\nproject(greet C)\n"
        "add_subdirectory(${HELLO_SRC} hello)\nadd_executable(greet greet.c)\n"
    )
    (proj / "greet.c").write_text(f'#include <stdio.h>\nint main(void){{puts("{greeting}");return 0;}}\n')
    return load_runtimes(folder)["hello"]


def test_a_project_that_is_not_a_cmake_folder_is_refused_naming_the_line(tmp_path):
    _files(tmp_path / "rt")
    shutil.rmtree(tmp_path / "rt" / "greet")
    with pytest.raises(
        RuntimeSpecError, match=r"hello.yaml:\d+: project 'greet' is no folder with a CMakeLists.txt"
    ):
        load_runtimes(tmp_path / "rt")


@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja")), reason="needs cmake and ninja")
def test_the_project_is_built_with_the_source_and_its_files_key_the_build(tmp_path, monkeypatch):
    monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "ccache"))
    sd = _sdist(tmp_path / "src")
    spec = _files(tmp_path / "rt")
    first = ensure_build(spec, "linux-x86_64", source=sd, root=tmp_path / "cache")
    run = {
        n: subprocess.run([str(p)], capture_output=True, text=True).stdout for n, p in first.products.items()
    }
    assert run == {"hello": "hello\n", "greet": "hi\n"}  # one configure: the tree and the project
    m = read_manifest(first.folder)
    assert m["project"]["path"] == "greet" and len(m["project"]["tree_sha256"]) == 64
    assert ensure_build(spec, "linux-x86_64", source=sd, root=tmp_path / "cache").reused
    changed = _files(tmp_path / "rt", greeting="hello there")  # the project's code changed: a new build
    second = ensure_build(changed, "linux-x86_64", source=sd, root=tmp_path / "cache")
    assert second.key != first.key and not second.reused
    out = subprocess.run([str(second.products["greet"])], capture_output=True, text=True).stdout
    assert out == "hello there\n"


@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja")), reason="needs cmake and ninja")
def test_a_build_interrupted_in_another_checkout_is_finished_from_this_one(tmp_path, monkeypatch):
    """The cache is shared by checkouts (a worktree, a CI clone): the same build key, another project
    folder. A build that one left half done (configured, no manifest) is finished by the other, not
    refused by CMake for a cache made from the first checkout's folder."""
    monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "ccache"))
    sd = _sdist(tmp_path / "src")
    mine, theirs = _files(tmp_path / "mine"), _files(tmp_path / "theirs")
    cache = tmp_path / "cache"
    done = ensure_build(theirs, "linux-x86_64", source=sd, root=cache)  # the key both checkouts share
    assert ensure_build(mine, "linux-x86_64", source=sd, root=cache).key == done.key
    (done.folder / MANIFEST).unlink()  # as if it had been interrupted after its configure
    assert (done.folder / "build" / "CMakeCache.txt").is_file()
    lines: list[str] = []
    again = ensure_build(mine, "linux-x86_64", source=sd, root=cache, progress=lines.append)
    assert not again.reused and again.key == done.key
    assert any("configuring again from" in ln and str(tmp_path / "mine") in ln for ln in lines), lines
    out = subprocess.run([str(again.products["greet"])], capture_output=True, text=True).stdout
    assert out == "hi\n"
