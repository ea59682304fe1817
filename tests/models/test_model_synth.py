"""edgelab model synth: the random-weight GGUF's shape, vocabulary, file and registration."""

from __future__ import annotations

import json
import time

import pytest
from typer.testing import CliRunner

from edgelab.cli import app
from edgelab.errors import ConfigError
from edgelab.models.gguf_synth import config_for, parse_params, vocabulary, write_gguf


def test_parse_params():
    assert parse_params("100M") == 100_000_000 and parse_params("1.5B") == 1_500_000_000
    assert parse_params("500k") == 500_000
    with pytest.raises(ConfigError):
        parse_params("lots")


def test_config_close_to_the_asked_size_and_llama_shaped():
    c = config_for(parse_params("100M"))
    assert abs(c.params - 100e6) / 100e6 < 0.1 and c.vocab == 32000
    assert c.head_dim == 64 and c.n_ff % 256 == 0 and c.n_embd % 256 == 0  # K-quants need rows of 256
    t = config_for(parse_params("2M"))
    assert t.params < 3e6 and t.vocab == 2048 and t.n_layer >= 2


def test_vocabulary_has_bytes_and_is_distinct_and_fast():
    t0 = time.perf_counter()
    tokens, scores, types = vocabulary(32000)
    assert time.perf_counter() - t0 < 5  # O(n): the O(n^2) version took minutes
    assert len(tokens) == len(set(tokens)) == len(scores) == len(types) == 32000
    assert tokens[:3] == ["<unk>", "<s>", "</s>"] and tokens[3] == "<0x00>" and tokens[258] == "<0xFF>"
    assert types[3] == 6 and types[259] == 1  # BYTE, NORMAL


def test_the_file_holds_what_llama_needs(tmp_path):
    import gguf

    cfg = config_for(parse_params("2M"))
    path = write_gguf(tmp_path / "m.gguf", cfg, seed=3)
    r = gguf.GGUFReader(str(path))

    def val(key):
        f = r.fields[key]
        return f.parts[f.data[0]].tolist()

    assert bytes(val("general.architecture")) == b"llama"
    assert val("llama.rope.dimension_count") == [cfg.head_dim]
    assert bytes(val("tokenizer.ggml.model")) == b"llama"
    names = {t.name for t in r.tensors}
    assert {
        "token_embd.weight",
        "output_norm.weight",
        "blk.0.attn_q.weight",
        "blk.0.ffn_down.weight",
    } <= names
    assert sum(int(t.n_elements) for t in r.tensors) == cfg.params
    again = write_gguf(tmp_path / "again.gguf", cfg, seed=3)
    assert again.read_bytes() == path.read_bytes()  # same seed, same bytes


def test_cli_synth_registers_a_random_weights_model(dbpath, tmp_path):
    res = CliRunner().invoke(
        app,
        [
            "--db",
            str(dbpath),
            "model",
            "synth",
            "tiny-test",
            "--params",
            "2M",
            "--out",
            str(tmp_path / "models"),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["kind"] == "model" and data["target"] == "any"
    md = data["metadata"]
    assert md["weights"] == "random" and md["architecture"] == "llama" and md["quant"] == "f16"
    assert md["params"] > 2e6 and md["recipe"]["generator"] == "edgelab.models.gguf_synth"


@pytest.mark.slow
def test_cli_synth_quantizes_with_the_labs_build(llama_build, dbpath, tmp_path):
    runner = CliRunner()
    res = runner.invoke(
        app,
        [
            "--db",
            str(dbpath),
            "model",
            "synth",
            "q",
            "--params",
            "4M",
            "--quant",
            "q4_k_m",
            "--out",
            str(tmp_path / "m"),
        ],
    )
    assert res.exit_code == 1 and "no llama-quantize built for linux-x86_64" in res.output
    res = runner.invoke(
        app,
        [
            "--db",
            str(dbpath),
            "model",
            "synth",
            "q",
            "--params",
            "4M",
            "--quant",
            "q4_k_m",
            "--out",
            str(tmp_path / "m"),
            "--quantizer",
            str(llama_build.products["llama-quantize"]),
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    (path,) = data["files"]
    assert path.endswith("-q4_k_m.gguf") and data["metadata"]["quant"] == "q4_k_m"
    f16 = next((tmp_path / "m").glob("*-f16.gguf"))
    assert data["sizes"][path] < f16.stat().st_size / 2
