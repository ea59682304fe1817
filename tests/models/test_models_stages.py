"""The exported stages: shaped as the pipeline specs say, byte-identical from a seed, valid ONNX that
ONNX's numpy evaluator runs; export caches and registers them as random-weight graph artifacts."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from edgelab.catalog.pipelines import load_pipelines
from edgelab.models import stages

onnx = pytest.importorskip("onnx")


def test_action_head_interface_follows_the_internvla_spec():
    spec = load_pipelines()["internvla-a1"]
    horizon, dims = spec.action["chunk"]
    assert spec.action["flow_steps"] == stages.ACTION_HEAD.params["flow_steps"]
    m = stages.build("action-head", 0)
    shapes = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in m.graph.input}
    assert shapes == {"cond": [1, stages.COND_DIM], "x": [horizon, dims], "tau": [1]}
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(3)
    v = ReferenceEvaluator(m).run(
        None,
        {
            "cond": rng.standard_normal((1, 128), dtype=np.float32),
            "x": rng.standard_normal((50, 32), dtype=np.float32),
            "tau": np.array([0.5], np.float32),
        },
    )[0]
    assert v.shape == (50, 32) and np.isfinite(v).all() and np.abs(v).max() > 0
    props = {p.key: p.value for p in m.metadata_props}
    assert props["weights"] == "random" and props["flow_steps"] == "10" and props["stage"] == "action_head"


def test_codec_decoder_gives_1920_samples_per_frame_for_16_codebooks():
    from onnx.reference import ReferenceEvaluator

    audio = load_pipelines()["qwen3-tts-0.6b"].audio
    assert (audio["codebooks"], audio["codebook_size"], audio["samples_per_frame"]) == (
        stages.CODEBOOKS,
        stages.CODEBOOK_SIZE,
        stages.SAMPLES_PER_FRAME,
    )

    m = stages.build("codec-decoder", 0)
    codes = np.random.default_rng(0).integers(0, 2048, (16, 7)).astype(np.int32)
    pcm = ReferenceEvaluator(m).run(None, {"codes": codes})[0]
    assert pcm.shape == (7, 1920) and np.abs(pcm).max() <= 0.5
    # causal: the first frames do not depend on later codes (left context is what matters)
    later = codes.copy()
    later[:, 5:] = (later[:, 5:] + 1) % 2048
    pcm2 = ReferenceEvaluator(m).run(None, {"codes": later})[0]
    assert np.array_equal(pcm[:5], pcm2[:5]) and not np.array_equal(pcm[5:], pcm2[5:])


def test_same_seed_same_bytes_other_seed_other_bytes():
    a = stages.build("action-head", 0).SerializeToString()
    assert a == stages.build("action-head", 0).SerializeToString()
    assert (
        hashlib.sha256(a).digest()
        != hashlib.sha256(stages.build("action-head", 1).SerializeToString()).digest()
    )


def test_export_caches_checks_and_registers_artifacts(dbpath):
    from edgelab.models.export import export, register
    from edgelab.store.db import get_engine, session_scope

    pytest.importorskip("MNN")
    ex = export("action-head", "onnx")
    assert ex.sha256 == hashlib.sha256(ex.path.read_bytes()).hexdigest()
    assert export("action-head", "onnx").path == ex.path  # reused from the cache
    mn = export("action-head", "mnn")
    assert mn.path.suffix == ".mnn" and mn.recipe["source_onnx_sha256"] == ex.sha256
    assert "_tools.mnnconvert" in mn.recipe["converter"]
    engine = get_engine(f"sqlite:///{dbpath}")
    with session_scope(engine) as s:
        art = register(s, mn)
        assert art.kind == "model" and art.meta["weights"] == "random" and art.meta["sha256"] == mn.sha256
        assert json.loads(art.provenance["recipe"])["stage"] == "action-head"
    # a changed file in the cache is not trusted: re-exported
    ex.path.write_bytes(b"corrupt")
    again = export("action-head", "onnx")
    assert again.sha256 == ex.sha256 and again.path.read_bytes() != b"corrupt"


def test_cli_model_export_json(dbpath, monkeypatch):
    from typer.testing import CliRunner

    from edgelab.cli import app

    res = CliRunner().invoke(
        app, ["--db", str(dbpath), "model", "export", "codec-decoder", "--format", "onnx", "--json"]
    )
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["artifact"] == "codec-decoder.random-s0.onnx" and len(d["sha256"]) == 64 and d["registered"]
    bad = CliRunner().invoke(app, ["--db", str(dbpath), "model", "export", "vision-tower"])
    assert bad.exit_code == 2 and "no exportable stage" in bad.output
