"""Artifact registry: hashing once (cache by path, size, mtime), provenance, manifests, CLI."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgelab.artifacts.hashing import cached_sha256, sha256_path
from edgelab.artifacts.manifest import export_manifest, import_manifest
from edgelab.artifacts.registry import (
    add_artifact,
    artifact_files,
    files_digest,
    get_artifact,
    list_artifacts,
    parse_meta,
    referenced_hashes,
    remove_artifact,
)
from edgelab.cli import app
from edgelab.errors import ConfigError, NotFound
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope

runner = CliRunner()


@pytest.fixture
def engine(tmp_path):
    dbmod.dispose_engines()
    yield get_engine(str(tmp_path / "reg.db"))
    dbmod.dispose_engines()


def _file(tmp_path: Path, name: str, data: bytes) -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(data)
    return p


def test_hash_is_cached_by_path_size_and_mtime(engine, tmp_path):
    f = _file(tmp_path, "w.bin", b"a" * 5000)
    with session_scope(engine) as s:
        h1, size, cached = cached_sha256(s, f)
        assert (h1, size, cached) == (hashlib.sha256(b"a" * 5000).hexdigest(), 5000, False)
        assert cached_sha256(s, f)[2] is True  # second look: from the cache, not re-read
    f.write_bytes(b"b" * 5000)  # same size, new content, new mtime
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 10_000_000))
    with session_scope(engine) as s:
        h2, _, cached = cached_sha256(s, f)
    assert cached is False and h2 == hashlib.sha256(b"b" * 5000).hexdigest()


def test_add_show_ls_rm_with_provenance(engine, tmp_path):
    w = _file(tmp_path, "model.gguf", os.urandom(10_000))
    tok = _file(tmp_path, "tok/tokenizer.json", b"{}")
    prov, meta = parse_meta(
        ["source_commit=abc123", "toolchain=cmake 3.28", "quantization=q4_k_m", "note=first"]
    )
    assert prov == {"source_commit": "abc123", "toolchain": "cmake 3.28", "quantization": "q4_k_m"}
    with session_scope(engine) as s:
        art = add_artifact(
            s,
            "qwen-q4",
            [w, tmp_path / "tok"],
            kind="weights",
            target="android-arm64",
            provenance=prov,
            meta=meta,
        )
        files = {f.path: f.sha256 for f in artifact_files(s, art)}
        assert files == {"model.gguf": sha256_path(w), "tok/tokenizer.json": sha256_path(tok)}
        assert art.digest == files_digest(files) and art.total_size == 10_002
        assert get_artifact(s, art.digest[:10]).name == "qwen-q4"
        with pytest.raises(ConfigError, match="already exists"):
            add_artifact(s, "qwen-q4", [w], kind="weights", target="android-arm64")
        with pytest.raises(ConfigError, match="unknown artifact kind"):
            add_artifact(s, "x", [w], kind="magic", target="android-arm64")
        assert [a.name for a in list_artifacts(s, target="android-arm64")] == ["qwen-q4"]
        assert referenced_hashes(s) == set(files.values())
        remove_artifact(s, "qwen-q4")
        assert referenced_hashes(s) == set()
        with pytest.raises(NotFound):
            get_artifact(s, "qwen-q4")


def test_manifest_round_trip_and_tampered_file_refused(engine, tmp_path):
    src = tmp_path / "src"
    w = _file(src, "voice.bin", os.urandom(3000))
    with session_scope(engine) as s:
        add_artifact(
            s,
            "voice-a",
            [w],
            kind="voice",
            target="any",
            component="qwen3-tts-speaker",
            provenance={"checkpoint_id": "Qwen/Qwen3-TTS", "checkpoint_revision": "r1"},
        )
        manifest = export_manifest(s, "voice-a")
    assert manifest["component"] == "qwen3-tts-speaker"
    assert manifest["files"] == {"voice.bin": sha256_path(w)}
    assert manifest["metadata"]["provenance"]["checkpoint_id"] == "Qwen/Qwen3-TTS"
    mpath = src / "voice-a.json"
    mpath.write_text(json.dumps(manifest))
    with session_scope(engine) as s:
        remove_artifact(s, "voice-a")
        art = import_manifest(s, mpath)
        assert art.digest == manifest["digest"] and art.provenance["checkpoint_revision"] == "r1"
    w.write_bytes(os.urandom(3000))
    with session_scope(engine) as s, pytest.raises(ConfigError, match="manifest says"):
        import_manifest(s, mpath, replace=True)


def test_cli_artifact_show_prints_provenance(tmp_path):
    dbmod.dispose_engines()
    db = str(tmp_path / "cli.db")
    w = _file(tmp_path, "llama-cli", os.urandom(2000))
    try:
        res = runner.invoke(
            app,
            [
                "--db",
                db,
                "artifact",
                "add",
                str(w),
                "--kind",
                "runtime",
                "--target",
                "linux-aarch64-cuda-sm87",
                "--name",
                "llama-orin",
                "--meta",
                "source_commit=deadbeef",
                "--meta",
                "build_flags=-DGGML_CUDA=ON",
            ],
        )
        assert res.exit_code == 0, res.output
        res = runner.invoke(app, ["--db", db, "artifact", "show", "llama-orin"])
        assert res.exit_code == 0, res.output
        assert "source_commit: deadbeef" in res.output and "build_flags: -DGGML_CUDA=ON" in res.output
        assert sha256_path(w) in res.output
        res = runner.invoke(app, ["--db", db, "artifact", "ls", "--json"])
        assert json.loads(res.stdout)[0]["name"] == "llama-orin"
        out = tmp_path / "m.json"
        assert (
            runner.invoke(app, ["--db", db, "artifact", "export", "llama-orin", "-o", str(out)]).exit_code
            == 0
        )
        assert runner.invoke(app, ["--db", db, "artifact", "rm", "llama-orin"]).exit_code == 0
        res = runner.invoke(app, ["--db", db, "artifact", "show", "llama-orin"])
        assert res.exit_code == 1 and "no artifact" in res.output
        res = runner.invoke(app, ["--db", db, "artifact", "import", str(out)])
        assert res.exit_code == 0, res.output
    finally:
        dbmod.dispose_engines()


@pytest.mark.parametrize("name,target", [("model\n", "any"), ("model", "android-arm64\n")])
def test_a_trailing_newline_is_not_a_valid_name_or_target(engine, tmp_path, name, target):
    from edgelab.artifacts.registry import add_artifact

    f = tmp_path / "w.bin"
    f.write_bytes(b"x")
    with session_scope(engine) as s, pytest.raises(ConfigError):
        add_artifact(s, name, [f], kind="weights", target=target)
