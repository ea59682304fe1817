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
from edgelab.runtimes.cache import read_manifest
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
