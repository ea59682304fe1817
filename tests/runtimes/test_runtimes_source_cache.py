"""Sources (folder, archive, sdist vendoring, gitlink commit) and the build cache, with a real
CMake project built through the same ensure_build the llama.cpp recipe uses."""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import textwrap

import pytest

from edgelab.errors import BuildError, RuntimeSpecError, SourceError
from edgelab.runtimes.build import ensure_build, register_build
from edgelab.runtimes.cache import build_key, read_manifest
from edgelab.runtimes.source import resolve_source, tree_sha256
from edgelab.runtimes.spec import load_runtimes
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope

COMMIT = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"


def _sdist(root, *, git=True, changelog=True):
    """A miniature llama-cpp-python sdist: vendor/hello with its submodule gitlink."""
    sd = root / "hello_py-1.2.3"
    tree = sd / "vendor" / "hello"
    tree.mkdir(parents=True)
    (sd / "CMakeLists.txt").write_text("# the bindings' own project\n")
    (sd / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: hello_py\nVersion: 1.2.3\n")
    if changelog:
        (sd / "CHANGELOG.md").write_text(
            "## [Unreleased]\n\n## [1.2.3]\n\n- feat: update hello to org/hello@0c1e57098\n\n"
            "## [1.2.2]\n\n- feat: update hello to org/hello@4df29be4f\n"
        )
    if git:
        (tree / ".git").write_text("gitdir: ../../.git/modules/vendor/hello\n")
        mod = sd / ".git" / "modules" / "vendor" / "hello"
        mod.mkdir(parents=True)
        (mod / "HEAD").write_text(COMMIT + "\n")
    (tree / "CMakeLists.txt").write_text(
        textwrap.dedent("""\
        cmake_minimum_required(VERSION 3.16)
        project(hello C)
        option(HELLO_LOUD "shout" OFF)
        add_executable(hello hello.c)
        if(HELLO_LOUD)
          target_compile_definitions(hello PRIVATE LOUD=1)
        endif()
        """)
    )
    (tree / "hello.c").write_text(
        '#include <stdio.h>\nint main(void){\n#ifdef LOUD\nputs("HELLO");\n#else\n'
        'puts("hello");\n#endif\nreturn 0;}\n'
    )
    return sd


def _runtime_file(folder, flags="[-DCMAKE_BUILD_TYPE=Release]", patches=""):
    folder.mkdir(exist_ok=True)
    (folder / "hello.yaml").write_text(
        textwrap.dedent(f"""\
        name: hello
        source: {{repo: https://example.invalid/hello, ref: v1}}
        targets:
          linux-x86_64:
            toolchain: [cmake, ninja]
            isa: x86-64
            flags: {flags}
            {"patches: " + patches if patches else ""}
            steps:
              - [cmake, -S, "{{src}}", -B, "{{build}}", -G, Ninja, "{{flags}}", "{{launcher}}"]
              - [cmake, --build, "{{build}}", --target, hello]
              - [cmake, -E, copy, "{{build}}/hello", "{{out}}"]
            produces: [hello]
        """)
    )
    return load_runtimes(folder)["hello"]


def test_folder_archive_and_vendored_tree_share_one_tree_hash(tmp_path):
    sd = _sdist(tmp_path / "src")
    folder = resolve_source("hello", sd, root=tmp_path / "cache")
    assert folder.tree == sd / "vendor" / "hello" and folder.kind == "dir"
    assert folder.commit == COMMIT  # from the submodule's gitlink, no git binary
    archive = tmp_path / "hello_py-1.2.3.tar.gz"
    with tarfile.open(archive, "w:gz") as t:
        t.add(sd, arcname=sd.name)
    packed = resolve_source("hello", archive, root=tmp_path / "cache")
    assert packed.kind == "archive" and packed.tree.is_relative_to(tmp_path / "cache" / "sources")
    assert packed.tree_sha256 == folder.tree_sha256 and packed.sha256 != folder.sha256
    assert packed.commit == COMMIT
    (packed.tree / "hello.c").write_text("changed")
    assert tree_sha256(packed.tree) != folder.tree_sha256


def test_commit_from_the_sdist_changelog_without_git(tmp_path):
    sd = _sdist(tmp_path, git=False)
    assert resolve_source("hello", sd).commit == "0c1e57098"
    sd2 = _sdist(tmp_path / "b", git=False, changelog=False)
    assert resolve_source("hello", sd2).commit is None


def test_bad_sources_say_what_to_pass(tmp_path):
    with pytest.raises(SourceError, match="no such source"):
        resolve_source("hello", tmp_path / "nope")
    (tmp_path / "x.txt").write_text("x")
    with pytest.raises(SourceError, match="not a folder or an archive"):
        resolve_source("hello", tmp_path / "x.txt")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceError, match="no hello source tree") as err:
        resolve_source("hello", tmp_path / "empty")
    assert "--source" in err.value.remedy


def test_build_key_depends_on_source_target_and_flag_order():
    k = build_key("llama.cpp", "a" * 64, "linux-x86_64", ["-DA=1", "-DB=1"])
    assert k.startswith("llama.cpp-linux-x86_64-")
    assert k == build_key("llama.cpp", "a" * 64, "linux-x86_64", ["-DA=1", "-DB=1"])
    assert k != build_key("llama.cpp", "a" * 64, "linux-x86_64", ["-DB=1", "-DA=1"])
    assert k != build_key("llama.cpp", "b" * 64, "linux-x86_64", ["-DA=1", "-DB=1"])


@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja")), reason="needs cmake and ninja")
def test_a_real_cmake_build_is_cached_reused_and_registered(tmp_path, monkeypatch):
    monkeypatch.setenv("CCACHE_DIR", str(tmp_path / "ccache"))
    spec = _runtime_file(tmp_path / "rt")
    sd = _sdist(tmp_path / "src")
    lines: list[str] = []
    first = ensure_build(spec, "linux-x86_64", source=sd, root=tmp_path / "cache", progress=lines.append)
    assert not first.reused and first.folder.parent == tmp_path / "cache" / "builds"
    assert subprocess.run([str(first.products["hello"])], capture_output=True, text=True).stdout == "hello\n"
    assert any(line.startswith("step 1/3 configure") for line in lines)
    assert any(line.startswith("build: ") and "/" in line for line in lines)  # ninja progress
    m = read_manifest(first.folder)
    assert (
        m["source_commit"] == COMMIT and m["isa"] == "x86-64" and m["flags"] == ["-DCMAKE_BUILD_TYPE=Release"]
    )
    again = ensure_build(spec, "linux-x86_64", source=sd, root=tmp_path / "cache")
    assert again.reused and again.key == first.key
    loud = ensure_build(
        _runtime_file(tmp_path / "rt2", "[-DCMAKE_BUILD_TYPE=Release, -DHELLO_LOUD=ON]"),
        "linux-x86_64",
        source=sd,
        root=tmp_path / "cache",
    )
    assert not loud.reused and loud.key != first.key
    assert subprocess.run([str(loud.products["hello"])], capture_output=True, text=True).stdout == "HELLO\n"
    dbmod.dispose_engines()
    engine = get_engine(str(tmp_path / "b.db"))
    try:
        with session_scope(engine) as s:
            (art,) = register_build(s, spec, first)
            assert art.name == "hello-linux-x86_64-hello" and art.kind == "runtime"
            assert art.meta["product"] == "hello" and art.meta["build_key"] == first.key
            assert art.meta["source_commit"] == COMMIT and art.meta["isa"] == "x86-64"
            assert len(art.meta["source_sha256"]) == 64
    finally:
        dbmod.dispose_engines()


@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja")), reason="needs cmake and ninja")
def test_a_failed_step_names_the_step_and_shows_the_log_tail(tmp_path):
    spec = _runtime_file(tmp_path / "rt")
    sd = _sdist(tmp_path / "src")
    (sd / "vendor" / "hello" / "hello.c").write_text("int main(void) { this is not C; }\n")
    with pytest.raises(BuildError) as err:
        ensure_build(spec, "linux-x86_64", source=sd, root=tmp_path / "cache")
    text = str(err.value)
    assert "step 2/3 build exited 1" in text and "hello.c" in text and "error" in text
    assert "build.log" in err.value.remedy
    folder = next((tmp_path / "cache" / "builds").iterdir())
    assert read_manifest(folder) is None  # an unfinished build is never reused


_QUIET_TO_PATCHED = """Why: a test patch.

--- a/hello.c
+++ b/hello.c
@@ -2,5 +2,5 @@
 #ifdef LOUD
 puts("HELLO");
 #else
-puts("hello");
+puts("patched");
 #endif
"""


@pytest.mark.skipif(not (shutil.which("cmake") and shutil.which("ninja")), reason="needs cmake and ninja")
@pytest.mark.skipif(not shutil.which("patch"), reason="needs GNU patch")
def test_a_patched_build_keys_and_records_its_patch_and_leaves_the_shared_source_alone(tmp_path):
    sd = _sdist(tmp_path / "src")
    tree = sd / "vendor" / "hello"
    before = tree_sha256(tree)
    plain = ensure_build(_runtime_file(tmp_path / "rt"), "linux-x86_64", source=sd, root=tmp_path / "cache")
    rt = tmp_path / "rtp"
    (rt / "patches").mkdir(parents=True)
    (rt / "patches" / "quiet.patch").write_text(_QUIET_TO_PATCHED)
    spec = _runtime_file(rt, patches="[patches/quiet.patch]")
    patched = ensure_build(spec, "linux-x86_64", source=sd, root=tmp_path / "cache")
    assert patched.key != plain.key and not patched.reused
    out = subprocess.run([str(patched.products["hello"])], capture_output=True, text=True).stdout
    assert out == "patched\n"
    assert subprocess.run([str(plain.products["hello"])], capture_output=True, text=True).stdout == "hello\n"
    assert tree_sha256(tree) == before and "patched" not in (tree / "hello.c").read_text()
    m = read_manifest(patched.folder)
    assert m["source_commit"] == COMMIT  # read from the original tree, not the copy
    gitlink = (patched.folder / "src" / ".git").read_text()
    assert gitlink.startswith("gitdir: /") and (tree / ".git").read_text().startswith("gitdir: ../")
    (rec,) = m["patches"]
    assert rec["file"] == "patches/quiet.patch" and len(rec["sha256"]) == 64
    assert read_manifest(plain.folder)["patches"] == []
    (rt / "patches" / "twice.patch").write_text(
        _QUIET_TO_PATCHED.replace('-puts("hello");', '-puts("patched");').replace(
            '+puts("patched', '+puts("twice'
        )
    )
    both = ensure_build(
        _runtime_file(rt, patches="[patches/quiet.patch, patches/twice.patch]"),
        "linux-x86_64",
        source=sd,
        root=tmp_path / "cache",
    )
    out = subprocess.run([str(both.products["hello"])], capture_output=True, text=True).stdout
    assert out == "twice\n" and tree_sha256(tree) == before  # the second builds on the first
    (rt / "patches" / "quiet.patch").write_text(_QUIET_TO_PATCHED.replace("+puts", "+ puts"))
    again = ensure_build(
        _runtime_file(rt, patches="[patches/quiet.patch]"), "linux-x86_64", source=sd, root=tmp_path / "cache"
    )
    assert again.key != patched.key  # the patch's bytes are part of what was built


@pytest.mark.skipif(not shutil.which("patch"), reason="needs GNU patch")
def test_a_patch_that_does_not_apply_or_is_missing_says_so(tmp_path):
    sd = _sdist(tmp_path / "src")
    (sd / "vendor" / "hello" / "hello.c").write_text("int main(void) { return 0; }\n")
    rt = tmp_path / "rt"
    (rt / "patches").mkdir(parents=True)
    (rt / "patches" / "quiet.patch").write_text(_QUIET_TO_PATCHED)
    spec = _runtime_file(rt, patches="[patches/quiet.patch]")
    with pytest.raises(BuildError, match="does not apply to this source") as err:
        ensure_build(spec, "linux-x86_64", source=sd, root=tmp_path / "cache")
    assert "pin the recipe's source" in err.value.remedy
    with pytest.raises(RuntimeSpecError, match="patch 'patches/gone.patch' is not a file"):
        _runtime_file(tmp_path / "rt2", patches="[patches/gone.patch]")
