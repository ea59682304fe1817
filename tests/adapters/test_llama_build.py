"""llama.cpp really built by the recipe (the session fixture builds it through the product when
the cache lacks it) and a random-weight GGUF really loading in it."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from typer.testing import CliRunner

from edgelab.adapters.llama_perf import parse_build_info, parse_perf
from edgelab.adapters.llama_placement import parse_placement
from edgelab.cli import app
from edgelab.runtimes.cache import read_manifest

pytestmark = pytest.mark.slow
ENV = {**os.environ, "OMP_WAIT_POLICY": "passive"}


def test_the_build_has_its_products_and_provenance(llama_build):
    assert set(llama_build.products) == {
        "llama-server",
        "llama-completion",
        "llama-bench",
        "llama-quantize",
        "llama-tts",
        "s3-controller",  # edgelab's own programs, built with the tree (runtimes/s3-controller)
        "s3-bare",
    }
    m = read_manifest(llama_build.folder)
    assert m["project"]["path"] == "s3-controller" and len(m["project"]["tree_sha256"]) == 64
    assert m["source_commit"].startswith("0c1e57098")
    assert (
        m["isa"] == "x86-64-v3" and "-DGGML_NATIVE=OFF" in m["flags"] and "-DLLAMA_BUILD_UI=OFF" in m["flags"]
    )
    assert len(m["source_sha256"]) == 64 and m["build_key"] == llama_build.key
    assert [p["file"] for p in m["patches"]] == ["patches/llama.cpp/common-log-flush-at-exit.patch"]
    out = subprocess.run(
        [str(llama_build.products["llama-completion"]), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    info = parse_build_info(out.stdout + out.stderr)
    assert info and m["source_commit"].startswith(info["commit"])


def test_a_tiny_random_gguf_loads_and_generates(llama_build, tiny_gguf):
    """Every run generates and carries its perf lines, which parse exactly. Upstream llama.cpp's
    log thread can drop a run's last lines at exit (ggml-org/llama.cpp#22142); the recipe's patch
    (runtimes/patches/llama.cpp/common-log-flush-at-exit.patch) flushes them, so none may be lost."""
    argv = [
        str(llama_build.products["llama-completion"]),
        "-m",
        str(tiny_gguf),
        "-n",
        "8",
        "-p",
        "hi",
        "-t",
        "1",
        "-no-cnv",
        "--temp",
        "0",
        "-lv",
        "4",
    ]
    for i in range(3):
        res = subprocess.run(
            argv, capture_output=True, text=True, timeout=120, env=ENV, stdin=subprocess.DEVNULL
        )
        assert res.returncode == 0, res.stderr[-2000:]
        assert parse_placement(res.stderr).observed == "cpu"
        perf = parse_perf(res.stderr)
        assert perf is not None, f"run {i + 1}: no perf lines in stderr:\n{res.stderr[-1500:]}"
    assert (
        perf.eval.tokens == 7 and perf.prompt.tokens == 2
    )  # hi + BOS; the first token comes from the prompt


def test_llama_bench_json_from_the_build(llama_build, tiny_gguf):
    from edgelab.adapters.llama_bench import by_test, parse_bench

    res = subprocess.run(
        [
            str(llama_build.products["llama-bench"]),
            "-m",
            str(tiny_gguf),
            "-p",
            "8",
            "-n",
            "4",
            "-r",
            "1",
            "-t",
            "1",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=ENV,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    recs = by_test(parse_bench(res.stdout))
    assert recs["tg4"].avg_ts > 0 and recs["pp8"].n_prompt == 8 and recs["tg4"].backends == "CPU"


def test_cli_build_reuses_the_cache_and_registers_each_product(llama_build, dbpath, monkeypatch):
    # the same tree the fixture built (an archive and its unpacked folder share the key)
    manifest = read_manifest(llama_build.folder)
    sdist = llama_build.folder.parents[1] / "downloads"
    source = os.environ.get("EDGELAB_LLAMA_SOURCE") or next(sdist.glob("llama_cpp_python-*.tar.gz"))
    runner = CliRunner()
    res = runner.invoke(
        app,
        [
            "--db",
            str(dbpath),
            "runtime",
            "build",
            "llama.cpp",
            "--target",
            "linux-x86_64",
            "--source",
            str(source),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["reused"] is True and data["build_key"] == llama_build.key
    names = {a["name"]: a for a in data["artifacts"]}
    server = names["llama.cpp-linux-x86_64-llama-server"]
    assert server["kind"] == "runtime" and server["target"] == "linux-x86_64"
    md = server["metadata"]
    assert md["runtime"] == "llama.cpp" and md["product"] == "llama-server" and md["isa"] == "x86-64-v3"
    assert md["source_commit"] == manifest["source_commit"] and md["build_key"] == llama_build.key
    assert "-DGGML_NATIVE=OFF" in md["flags"]
    res = runner.invoke(app, ["--db", str(dbpath), "artifact", "ls", "--json"])
    assert {"llama.cpp-linux-x86_64-llama-quantize", "llama.cpp-linux-x86_64-llama-bench"} <= {
        a["name"] for a in json.loads(res.stdout)
    }


def test_cli_build_refuses_a_missing_source(dbpath, tmp_path):
    res = CliRunner().invoke(
        app,
        [
            "--db",
            str(dbpath),
            "runtime",
            "build",
            "llama.cpp",
            "--target",
            "linux-x86_64",
            "--source",
            str(tmp_path / "nowhere.tar.gz"),
        ],
    )
    assert res.exit_code == 1 and "no such source" in res.output
