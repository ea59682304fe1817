"""Qwen3-TTS in llama.cpp's layout, with random weights: geometry, vocabulary, the two GGUF files,
their registration, and the readers of what llama-tts reports (its log, its WAV). The files are
loaded by the real llama-tts and the S3 controller in tests/deploy/test_qwen3tts_llamacpp.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from edgelab.adapters.llama_tts import parse_log
from edgelab.cli import app
from edgelab.errors import ConfigError
from edgelab.models import qwen3tts_gguf as q3
from edgelab.protocols.wav import wav_facts, wav_file

SMALL = 0.0625


def _val(r, key):
    """A scalar or string field as a list of its values; an array field as the list of its items."""
    f = r.fields[key]
    if len(f.data) == 1:
        return f.parts[f.data[0]].tolist()
    return [v for i in f.data for v in f.parts[i].tolist()]


def test_real_geometry_is_the_published_configuration():
    g = q3.geometry("qwen3-tts")  # the family name is the 0.6B model
    assert (g.model, g.hidden, g.layers, g.heads, g.kv_heads, g.head_dim, g.ff) == (
        "qwen3-tts-0.6b", 1024, 28, 16, 8, 128, 3072,
    )  # fmt: skip
    assert g.rope_sections == (24, 20, 20, 0) and sum(g.rope_sections) == g.head_dim // 2
    assert g.vocab == 151936 + 3072
    big = q3.geometry("qwen3-tts-1.7b")
    assert (big.hidden, big.ff, big.cp_hidden) == (2048, 6144, 1024)  # 1.7B projects into the predictor
    counts = q3.parameter_counts(g)
    assert 0.55e9 < counts["talker"] < 0.65e9 and counts["code2wav"] > 0.05e9
    with pytest.raises(ConfigError):
        q3.geometry("qwen3-tts-9b")
    with pytest.raises(ConfigError):
        q3.geometry("qwen3-tts-0.6b", 1.5)


@pytest.mark.parametrize("scale", [SMALL, 0.25, 0.5])
def test_scaled_geometry_keeps_what_clip_cpp_fixes(scale):
    g = q3.resolved(q3.geometry("qwen3-tts-0.6b", scale))
    assert sum(g.rope_sections) == g.head_dim // 2 and g.rope_sections[3] == 0
    assert g.spk_channels % q3.RES2NET_SCALE == 0  # the Res2Net split is fixed at 8
    assert g.decoder_dim % 16 == 0  # four DAC blocks halve it
    names = {t.name for t in q3.code2wav_tensors(g)}
    assert {f"a.gen.wav.tfm.blk.{i}.attn_q.weight" for i in range(q3.WAV_LAYERS)} <= names
    assert (g.hidden != g.cp_hidden) == any(
        t.name.startswith("a.gen.code.proj_in") for t in q3.code_predictor_tensors(g)
    )


def test_vocabulary_is_text_then_codec_rows_named_as_the_converter_names_them():
    v = q3.vocabulary(real=True)
    assert v.text_vocab == 151936 and v.size == 151936 + 3072
    assert v.tokens[151644] == "<|im_start|>" and v.tokens[151671] == "<tts_pad>"
    assert v.tokens[151672] == "<tts_text_bos>" and v.tokens[151673] == "<tts_text_eod>"
    assert v.tokens[:2] == ["!", '"'] and v.tokens[v.text_vocab] == "<|codec_0|>"
    assert v.tokens[v.codec("<|codec_eos_token|>")] == "<|codec_eos_token|>"
    assert v.codec("<|codec_eos_token|>") == 151936 + 2150 and v.codec("<|codec_pad|>") == 151936 + 2148
    assert v.tokens[v.text_vocab + 2050] == "<|codec_language_english|>"
    assert v.tokens[v.text_vocab + 3061] == "<|spk_ryan|>"
    assert set(v.types[v.text_vocab :]) == {q3.TOKEN_CONTROL}
    small = q3.vocabulary(real=False)
    assert small.text_vocab % 64 == 0 and "<tts_pad>" in small.specials
    assert len(set(small.tokens)) == small.size  # distinct: the loader maps text to ids


def test_the_two_files_hold_what_the_loaders_read(tmp_path):
    import gguf

    g = q3.resolved(q3.geometry("qwen3-tts-0.6b", SMALL))
    talker = q3.write_talker(tmp_path / "t.gguf", g, seed=1)
    mmproj = q3.write_mmproj(tmp_path / "m.gguf", g, seed=1)
    r = gguf.GGUFReader(str(talker))
    assert bytes(_val(r, "general.architecture")) == b"qwen3tts"
    assert _val(r, "qwen3tts.rope.dimension_sections") == list(g.rope_sections)
    assert _val(r, "qwen3tts.attention.key_length") == [g.head_dim]
    assert (
        bytes(_val(r, "tokenizer.ggml.model")) == b"gpt2" and bytes(_val(r, "tokenizer.ggml.pre")) == b"qwen2"
    )
    eos = _val(r, "tokenizer.ggml.eos_token_id")[0]
    suppress = _val(r, "tokenizer.ggml.suppress_tokens")
    assert r.fields["tokenizer.ggml.suppress_tokens"].types == [
        gguf.GGUFValueType.ARRAY,
        gguf.GGUFValueType.INT32,
    ]
    assert eos == g.text_vocab + 2150 and eos not in suppress and len(suppress) == 1023
    tensors = {t.name: t for t in r.tensors}
    assert list(tensors["output.weight"].shape) == [g.hidden, 3072]  # width 3072: hard-coded in llama.cpp
    assert list(tensors["token_embd.weight"].shape) == [g.hidden, g.vocab]
    assert len(tensors) == 3 + 11 * g.layers
    m = gguf.GGUFReader(str(mmproj))
    assert bytes(_val(m, "clip.audio.projector_type")) == b"qwen3tts_spkenc"
    assert bytes(_val(m, "clip.gen.audio.projector_type")) == b"qwen3tts_gen"
    mt = {t.name: t for t in m.tensors}
    assert list(mt["a.gen.code.head.weight"].shape) == [
        g.cp_hidden,
        2048,
        15,
    ]  # 15 acoustic codebooks of 2048
    assert list(mt["mm.a.fc.weight"].shape)[2] == g.hidden  # the speaker embedding is the talker's width
    assert list(mt["a.gen.code.out_embd.weight"].shape) == [g.hidden, 3072]
    # kernels the converter forces: conv F16, transposed conv F32
    assert mt["a.gen.wav.dac.blk.0.conv.weight"].tensor_type == gguf.GGMLQuantizationType.F32
    assert mt["a.gen.wav.pre_conv.weight"].tensor_type == gguf.GGMLQuantizationType.F16
    # same seed, same bytes; weights drawn per tensor name
    again = q3.write_talker(tmp_path / "t2.gguf", g, seed=1)
    assert again.read_bytes() == talker.read_bytes()
    other = q3.write_talker(tmp_path / "t3.gguf", g, seed=2)
    assert other.read_bytes() != talker.read_bytes()


def test_model_synth_registers_talker_and_mmproj_as_random_models(tmp_path, monkeypatch):
    db = tmp_path / "lab.db"
    monkeypatch.setenv("EDGELAB_DB", f"sqlite:///{db}")
    res = CliRunner().invoke(
        app,
        ["model", "synth", "qwen3-tts-0.6b", "--scale", str(SMALL), "--out", str(tmp_path / "m"), "--json"],
    )
    assert res.exit_code == 0, res.output
    arts = json.loads(res.stdout)
    assert [a["name"] for a in arts] == ["qwen3-tts-0.6b", "qwen3-tts-0.6b-mmproj"]
    assert [a["metadata"]["role"] for a in arts] == ["talker", "mmproj"]
    assert all(a["metadata"]["weights"] == "random" and a["component"] == "qwen3-tts-0.6b" for a in arts)
    assert arts[0]["metadata"]["scale"] == SMALL and arts[0]["metadata"]["quant"] == "f16"
    bad = CliRunner().invoke(app, ["model", "synth", "qwen3-tts-0.6b", "--params", "2M"])
    assert bad.exit_code == 2 and "--scale" in bad.output
    bad = CliRunner().invoke(app, ["model", "synth", "tiny", "--scale", "0.5"])
    assert bad.exit_code == 2


# a real llama-tts log (vendored llama.cpp 0c1e570, the small model above, -n 10), its last lines
LOG = """\
0.00.764.740 I load_hparams: model size:         11.69 MiB
0.00.026.254 I load_tensors:   CPU_Mapped model buffer size =     1.19 MiB
0.03.471.968 I frames generated: 8, speed: 3.91 frames/s
0.05.403.053 I generated 10 frames, 38444 bytes of WAV audio (24000 Hz)
0.05.403.098 I timings: prompt eval 0.61s + generation 2.89s + vocoder 1.09s = total 4.59s
0.05.403.099 I          output audio = 0.80s (audio time = 0.17x process time)
0.05.403.265 I wrote s5c.wav
"""


def test_llama_tts_log_gives_timings_frames_audio_and_load():
    log = parse_log(LOG)
    assert log.complete and log.error is None
    assert (log.frames, log.wav_bytes, log.sample_rate) == (10, 38444, 24000)
    assert (log.prompt_s, log.generation_s, log.vocoder_s, log.total_s) == (0.61, 2.89, 1.09, 4.59)
    assert log.audio_s == 0.8 and log.ratio == 0.17
    assert log.timings_at_s == pytest.approx(5.403098) and log.load_s == pytest.approx(5.403098 - 4.59)
    assert log.rtf == pytest.approx(4.59 / 0.8) and log.frames_per_s == pytest.approx(10 / 2.89)
    cut = parse_log(LOG.split("0.05.403.053")[0] + "failed to load mmproj m.gguf\n")
    assert not cut.complete and cut.error == "failed to load mmproj m.gguf"
    assert parse_log("").error.startswith("no timings line")


def test_wav_facts_count_samples_and_hash_the_pcm_only():
    pcm = (np.arange(1920 * 3, dtype="<i2") - 100).tobytes()
    f = wav_facts(wav_file(pcm, 24000))
    assert f is not None and (f.sample_rate, f.channels, f.bits, f.samples) == (24000, 1, 16, 5760)
    import hashlib

    assert f.pcm_sha256 == hashlib.sha256(pcm).hexdigest() and f.seconds == pytest.approx(0.24)
    assert wav_facts(b"not a wav") is None


def test_a_per_stage_placement_map_is_read_stage_by_stage():
    from edgelab.deploy.placement import _from_event

    line = json.dumps(
        {
            "kind": "run.start",
            "meta": {"placement": {"talker": {"observed": "gpu"}, "code2wav": {"observed": "cpu"}, "x": {}}},
        }
    )
    assert [(stage, word) for stage, word, _fb, _ev in _from_event(line) or []] == [
        ("talker", "gpu"),
        ("code2wav", "cpu"),
    ]
    whole = _from_event(json.dumps({"kind": "run.start", "meta": {"placement": "npu"}}))
    assert [(stage, word) for stage, word, _fb, _ev in whole or []] == [(None, "npu")]
    assert not _from_event("not json")
