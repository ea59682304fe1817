"""runtimes/*.yaml: every file loads; errors name file:line; builds say exactly what is missing;
the reference runtime really builds, reproducibly, and its zipapp runs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from edgelab.artifacts.hashing import sha256_path
from edgelab.artifacts.registry import artifact_files
from edgelab.errors import BuildError, ConfigError
from edgelab.runtimes import load_runtimes
from edgelab.runtimes.build import build_runtime, check_toolchain
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope


def test_every_runtime_file_loads():
    specs = load_runtimes()
    assert {"llama.cpp", "mnn", "executorch", "ncnn", "vllm-omni", "reference"} <= set(specs)
    orin = specs["llama.cpp"].targets["linux-aarch64-cuda-sm87"]
    assert "-DCMAKE_CUDA_ARCHITECTURES=87-real" in orin.flags and "cuda-aarch64" in orin.toolchain
    android = specs["mnn"].targets["android-arm64"]
    assert "android-ndk" in android.toolchain and "-DMNN_OPENCL=ON" in android.flags
    assert specs["vllm-omni"].pip and "S1" in specs["vllm-omni"].launch["qwen3-tts-0.6b"]
    for spec in specs.values():
        assert spec.repo and spec.ref or spec.pip or spec.extra.get("local"), spec.name


def test_errors_name_file_and_line(tmp_path):
    (tmp_path / "bad.yaml").write_text(
        "name: bad\nsource: {repo: https://x, ref: v1}\ntargets:\n  android-arm64:\n"
        "    toolchain: [cmake, rust]\n    steps: [[make, '{nowhere}']]\n    produces: [a]\n"
        "launch:\n  pi0: {S2: [x]}\n"
    )
    with pytest.raises(ConfigError) as err:
        load_runtimes(tmp_path)
    text = str(err.value)
    assert f"{tmp_path / 'bad.yaml'}:5: unknown tool 'rust'" in text
    assert "unknown placeholder {nowhere}" in text
    assert f"{tmp_path / 'bad.yaml'}:9: unknown strategy 'S2'" in text


def test_missing_toolchain_is_named_exactly(monkeypatch, tmp_path):
    specs = load_runtimes()
    monkeypatch.setenv("PATH", str(tmp_path))  # nothing on PATH
    monkeypatch.delenv("ANDROID_NDK_HOME", raising=False)
    monkeypatch.delenv("ANDROID_NDK_ROOT", raising=False)
    missing = {m.tool: m for m in check_toolchain(specs["llama.cpp"].targets["android-arm64-opencl"])}
    assert set(missing) == {"cmake", "ninja", "android-ndk"}
    assert "ANDROID_NDK_HOME is not set" in missing["android-ndk"].detail
    assert "no registry this lab reaches" in missing["android-ndk"].remedy
    monkeypatch.setenv("ANDROID_NDK_HOME", str(tmp_path))
    missing = {m.tool: m for m in check_toolchain(specs["llama.cpp"].targets["android-arm64-opencl"])}
    assert "no build/cmake/android.toolchain.cmake" in missing["android-ndk"].detail
    # the cross compilers are named with the Debian package that installs them
    cross = {m.tool: m for m in check_toolchain(specs["llama.cpp"].targets["linux-aarch64"])}
    assert cross["aarch64-linux-gnu-g++"].remedy == "apt-get install -y g++-aarch64-linux-gnu"
    win = {m.tool: m for m in check_toolchain(specs["llama.cpp"].targets["windows-x64"])}
    assert win["x86_64-w64-mingw32-g++-posix"].remedy == "apt-get install -y g++-mingw-w64-x86-64-posix"
    # a recipe with no cross toolchain file builds for the host it runs on, and nowhere else
    native_recipe = specs["mnn"].targets["linux-aarch64"]
    native = check_toolchain(native_recipe, host=("linux", "x86_64"))
    assert any(m.tool == "host" and "aarch64 host" in m.detail for m in native)
    assert not any(m.tool == "host" for m in check_toolchain(native_recipe, host=("linux", "aarch64")))
    # a cross recipe runs anywhere its tools are
    assert not any(
        m.tool == "host"
        for m in check_toolchain(specs["llama.cpp"].targets["linux-aarch64"], host=("linux", "x86_64"))
    )


def test_build_refused_with_what_is_missing(monkeypatch, tmp_path):
    monkeypatch.delenv("ANDROID_NDK_HOME", raising=False)
    monkeypatch.delenv("ANDROID_NDK_ROOT", raising=False)
    dbmod.dispose_engines()
    engine = get_engine(str(tmp_path / "b.db"))
    try:
        with (
            session_scope(engine) as s,
            pytest.raises(BuildError, match="missing android-ndk: ANDROID_NDK_HOME is not set"),
        ):
            build_runtime(s, load_runtimes()["ncnn"], "android-arm64", tmp_path / "wd")
        assert not (tmp_path / "wd").exists()  # nothing ran
    finally:
        dbmod.dispose_engines()


def test_reference_runtime_builds_reproducibly_and_runs(tmp_path):
    dbmod.dispose_engines()
    engine = get_engine(str(tmp_path / "b.db"))
    spec = load_runtimes()["reference"]
    try:
        with session_scope(engine) as s:
            art = build_runtime(s, spec, "android-arm64", tmp_path / "wd1")
            files = artifact_files(s, art)
            assert [f.path for f in files] == ["edgelab-reference.pyz"]
            assert art.kind == "runtime" and art.target == "android-arm64"
            assert art.provenance["source_commit"] and art.provenance["toolchain"].startswith("python ")
            assert "reference.yaml" in art.provenance["recipe"]
            again = build_runtime(s, spec, "android-arm64", tmp_path / "wd2", name="again")
            assert again.digest == art.digest  # same sources, same bytes
        pyz = tmp_path / "wd1" / "out" / "edgelab-reference.pyz"
        assert sha256_path(pyz) == files[0].sha256
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(pyz)}
        for argv in (
            [sys.executable, "-m", "edgelab.reference", "--help"],
            [sys.executable, str(pyz), "vla", "--help"],
        ):
            res = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
            assert res.returncode == 0, res.stderr
            assert "edgelab.reference" in res.stdout or "--control-hz" in res.stdout
    finally:
        dbmod.dispose_engines()


def test_cli_runtime_ls_and_show(tmp_path):
    from typer.testing import CliRunner

    from edgelab.cli import app

    runner = CliRunner()
    res = runner.invoke(app, ["--db", str(tmp_path / "c.db"), "runtime", "show", "llama.cpp"])
    assert res.exit_code == 0, res.output
    assert "-DCMAKE_CUDA_ARCHITECTURES=87-real" in res.output and "b5000" in res.output
    res = runner.invoke(app, ["--db", str(tmp_path / "c.db"), "runtime", "ls", "--json"])
    assert {r["name"] for r in __import__("json").loads(res.stdout)} >= {"reference", "vllm-omni"}
    assert Path(load_runtimes()["reference"].file).name == "reference.yaml"
