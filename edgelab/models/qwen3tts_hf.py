"""A random-weight Qwen3-TTS checkpoint in Hugging Face layout, made offline (``weights: random``).

The layout is Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice's: ``config.json`` (model_type ``qwen3_tts``,
talker + code predictor, speakers, languages, codec ids), a Qwen2-style byte-level BPE tokenizer
(``vocab.json``, ``merges.txt``, ``tokenizer_config.json``), ``model.safetensors`` (``talker.*``),
and ``speech_tokenizer/`` (the 12 Hz codec: ``config.json`` with a Mimi encoder and the code2wav
decoder, ``preprocessor_config.json``, ``model.safetensors``). It is what vLLM-Omni's loaders read
(``vllm serve DIR --omni``) and what llama.cpp's ``convert_hf_to_gguf.py`` converts (its
``conversion/qwen3tts.py``), so both engines can run the same weights.

Geometry (stated, :data:`GEOMETRY`): the talker and code predictor are small (hidden 64, 2 and 1
layers); the codec keeps what llama.cpp hard-codes for code2wav (8 transformer layers of 512 with
16 heads, 1024 FFN, 72-frame window, upsampling 2x2 then 8x5x4x3 = 1920 samples a frame) with a
narrow convolutional decoder (decoder_dim 96), and a small Mimi encoder (voice cloning only).

The JSON and tokenizer files are written here; the tensors by :mod:`edgelab.models.qwen3tts_hf_tensors`
run in an interpreter that has torch and vLLM-Omni (the vLLM-Omni venv): the codec's tensors are
exactly the state of vLLM-Omni's own ``Qwen3TTSTokenizerV2Model`` for this config, seeded.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

GEOMETRY: dict[str, Any] = {
    "talker": {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "intermediate_size": 128,
        "text_hidden_size": 64,
        "mrope_section": [2, 3, 3],  # sums to head_dim / 2
    },
    "code_predictor": {
        "hidden_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "intermediate_size": 128,
    },
    "codec_decoder": {
        "hidden_size": 512,
        "intermediate_size": 1024,
        "num_hidden_layers": 8,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "latent_dim": 128,
        "codebook_dim": 64,
        "decoder_dim": 96,
    },
    "codec_encoder": {
        "hidden_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "head_dim": 16,
        "intermediate_size": 128,
        "num_filters": 8,
        "codebook_dim": 64,
        "vector_quantization_hidden_dimension": 64,
    },
}
# Codec ids and speakers of the released 0.6B CustomVoice checkpoint (the talker's 3072-row vocab).
CODEC_IDS = {
    "codec_pad_id": 2148,
    "codec_bos_id": 2149,
    "codec_eos_token_id": 2150,
    "codec_think_id": 2154,
    "codec_nothink_id": 2155,
    "codec_think_bos_id": 2156,
    "codec_think_eos_id": 2157,
}
SPEAKERS = {"serena": 3066, "vivian": 3065, "ryan": 3061}
LANGUAGES = {"english": 2050, "chinese": 2055, "spanish": 2054, "french": 2061}
# The tokenizer: the 256 byte symbols, whole-word merges for the chat template's role words, then
# Qwen's special tokens (their ids are in config.json, so the text vocabulary stays small).
WORDS = ("assistant", "user", "system")
SPECIALS = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|tts_pad|>",
    "<|tts_text_bos|>",
    "<|tts_text_eod|>",
    "<|tts_text_bos_single|>",
)


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (byte-level BPE symbols)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars = {b: chr(b) for b in keep}
    n = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + n)
            n += 1
    return chars


def tokenizer_files() -> tuple[dict[str, int], list[str], dict[str, int]]:
    """(vocab, merges, special token ids): byte symbols, role-word merges, specials after them."""
    byte = _bytes_to_unicode()
    vocab = {byte[b]: i for i, b in enumerate(sorted(byte))}
    merges: list[str] = []
    for word in WORDS:
        cur = word[0]
        for ch in word[1:]:
            merges.append(f"{cur} {ch}")
            cur += ch
            vocab.setdefault(cur, len(vocab))
    specials = {tok: len(vocab) + i for i, tok in enumerate(SPECIALS)}
    return vocab, merges, specials


def configs(seed: int) -> dict[str, dict[str, Any]]:
    """Every JSON file of the checkpoint, by path inside it."""
    vocab, _merges, sp = tokenizer_files()
    text_vocab = (len(vocab) + len(sp) + 63) // 64 * 64
    t, cp = GEOMETRY["talker"], GEOMETRY["code_predictor"]
    dec, enc = GEOMETRY["codec_decoder"], GEOMETRY["codec_encoder"]
    talker = {
        "model_type": "qwen3_tts_talker",
        "hidden_size": t["hidden_size"],
        "intermediate_size": t["intermediate_size"],
        "num_hidden_layers": t["num_hidden_layers"],
        "num_attention_heads": t["num_attention_heads"],
        "num_key_value_heads": t["num_key_value_heads"],
        "head_dim": t["head_dim"],
        "hidden_act": "silu",
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-06,
        "rope_theta": 1000000,
        "rope_scaling": {"interleaved": True, "mrope_section": t["mrope_section"], "rope_type": "default"},
        "position_id_per_seconds": 13,
        "vocab_size": 3072,
        "text_vocab_size": text_vocab,
        "text_hidden_size": t["text_hidden_size"],
        "num_code_groups": 16,
        "use_cache": True,
        **CODEC_IDS,
        "spk_id": dict(SPEAKERS),
        "spk_is_dialect": dict.fromkeys(SPEAKERS, False),
        "codec_language_id": dict(LANGUAGES),
        "code_predictor_config": {
            "model_type": "qwen3_tts_talker_code_predictor",
            "hidden_size": cp["hidden_size"],
            "intermediate_size": cp["intermediate_size"],
            "num_hidden_layers": cp["num_hidden_layers"],
            "num_attention_heads": cp["num_attention_heads"],
            "num_key_value_heads": cp["num_key_value_heads"],
            "head_dim": cp["head_dim"],
            "hidden_act": "silu",
            "max_position_embeddings": 65536,
            "rms_norm_eps": 1e-06,
            "rope_theta": 1000000,
            "vocab_size": 2048,
            "num_code_groups": 16,
            "use_cache": True,
        },
    }
    config = {
        "architectures": ["Qwen3TTSForConditionalGeneration"],
        "model_type": "qwen3_tts",
        "tokenizer_type": "qwen3_tts_tokenizer_12hz",
        "tts_model_size": "0b6",
        "tts_model_type": "custom_voice",
        "im_start_token_id": sp["<|im_start|>"],
        "im_end_token_id": sp["<|im_end|>"],
        "tts_pad_token_id": sp["<|tts_pad|>"],
        "tts_bos_token_id": sp["<|tts_text_bos|>"],
        "tts_eos_token_id": sp["<|tts_text_eod|>"],
        "assistant_token_id": vocab["assistant"],
        "torch_dtype": "bfloat16",
        "talker_config": talker,
        # ECAPA-TDNN at its released channels; its embedding is a talker input, so enc_dim = hidden
        "speaker_encoder_config": {"enc_dim": t["hidden_size"], "sample_rate": 24000},
        "edgelab": {"weights": "random", "seed": seed, "geometry": GEOMETRY},
    }
    codec = {
        "architectures": ["Qwen3TTSTokenizerV2Model"],
        "model_type": "qwen3_tts_tokenizer_12hz",
        "input_sample_rate": 24000,
        "output_sample_rate": 24000,
        "decode_upsample_rate": 1920,
        "encode_downsample_rate": 1920,
        "encoder_valid_num_quantizers": 16,
        "decoder_config": {
            "codebook_size": 2048,
            "num_quantizers": 16,
            "hidden_size": dec["hidden_size"],
            "intermediate_size": dec["intermediate_size"],
            "num_hidden_layers": dec["num_hidden_layers"],
            "num_attention_heads": dec["num_attention_heads"],
            "num_key_value_heads": dec["num_key_value_heads"],
            "latent_dim": dec["latent_dim"],
            "codebook_dim": dec["codebook_dim"],
            "decoder_dim": dec["decoder_dim"],
            "sliding_window": 72,
            "rope_theta": 10000,
            "rms_norm_eps": 1e-5,
            "layer_scale_initial_scale": 0.01,
            "max_position_embeddings": 8000,
            "upsample_rates": [8, 5, 4, 3],
            "upsampling_ratios": [2, 2],
        },
        "encoder_config": {
            "model_type": "mimi",
            "sampling_rate": 24000,
            "frame_rate": 12.5,
            "_frame_rate": 12.5,
            "audio_channels": 1,
            "hidden_size": enc["hidden_size"],
            "num_hidden_layers": enc["num_hidden_layers"],
            "num_attention_heads": enc["num_attention_heads"],
            "num_key_value_heads": enc["num_key_value_heads"],
            "head_dim": enc["head_dim"],
            "intermediate_size": enc["intermediate_size"],
            "num_filters": enc["num_filters"],
            "upsample_groups": enc["hidden_size"],
            "codebook_size": 2048,
            "codebook_dim": enc["codebook_dim"],
            "vector_quantization_hidden_dimension": enc["vector_quantization_hidden_dimension"],
            "num_quantizers": 32,
            "num_semantic_quantizers": 1,
            "upsampling_ratios": [8, 6, 5, 4],
            "sliding_window": 250,
        },
        "edgelab": {"weights": "random", "seed": seed},
    }
    features = {
        "feature_extractor_type": "EncodecFeatureExtractor",
        "feature_size": 1,
        "sampling_rate": 24000,
        "padding_side": "right",
        "padding_value": 0.0,
        "return_attention_mask": True,
    }
    tok_config = {
        "tokenizer_class": "Qwen2Tokenizer",
        "model_max_length": 32768,
        "errors": "replace",
        "clean_up_tokenization_spaces": False,
        "add_prefix_space": False,
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "added_tokens_decoder": {
            str(i): {
                "content": tok,
                "special": True,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "single_word": False,
            }
            for tok, i in sp.items()
        },
        "additional_special_tokens": [t for t in SPECIALS if t not in ("<|endoftext|>", "<|im_end|>")],
    }
    generation = {"do_sample": True, "temperature": 0.9, "top_k": 50, "top_p": 1.0, "max_new_tokens": 4096}
    return {
        "config.json": config,
        "generation_config.json": generation,
        "tokenizer_config.json": tok_config,
        "speech_tokenizer/config.json": codec,
        "speech_tokenizer/preprocessor_config.json": features,
    }


def write(out: Path, seed: int = 0, *, python: str) -> dict[str, Path]:
    """The whole checkpoint in ``out``; the tensors by ``python`` (torch and vLLM-Omni importable).

    Returns every file written, by its path inside the checkpoint.
    """
    out = Path(out)
    (out / "speech_tokenizer").mkdir(parents=True, exist_ok=True)
    for rel, data in configs(seed).items():
        (out / rel).write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    vocab, merges, _sp = tokenizer_files()
    (out / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (out / "merges.txt").write_text("#version: 0.2\n" + "".join(m + "\n" for m in merges), encoding="utf-8")
    from edgelab.models import qwen3tts_hf_tensors

    script = Path(qwen3tts_hf_tensors.__file__).read_text(encoding="utf-8")
    res = subprocess.run(
        [python, "-", str(out), str(seed)], input=script, capture_output=True, text=True, timeout=1800
    )
    if res.returncode != 0:
        from edgelab.errors import ConfigError

        raise ConfigError(
            f"the tensor generator failed under {python}: {(res.stderr or res.stdout).strip().splitlines()[-1:]}",
            remedy="give --python an interpreter with torch and vllm-omni (the venv of "
            "`edgelab runtime install vllm-omni`)",
        )
    return {p.relative_to(out).as_posix(): p for p in sorted(out.rglob("*")) if p.is_file()}


def default_python(engine, device: str | None = None) -> str | None:
    """An interpreter with torch and vLLM-Omni: the vLLM-Omni venv a probe recorded (the lab's own
    virtual devices' venvs are on this host), else None."""
    from edgelab.probe.facts import Facts
    from edgelab.store.db import session_scope
    from edgelab.store.devices import list_devices
    from edgelab.store.snapshots import latest_snapshot

    with session_scope(engine, write=False) as s:
        devices = [d for d in list_devices(s) if (device is None or d.name == device) and d.virtual]
        for d in devices:
            try:
                sw = Facts.from_dict(latest_snapshot(s, d.name).facts or {}).software
            except Exception:  # noqa: BLE001 - a device never probed has no venv to offer
                continue
            venv = sw.get("vllm_venv")
            if venv and Path(venv, "bin", "python").exists():
                return str(Path(venv, "bin", "python"))
    return None


def synth_checkpoint(
    session, name: str, out: Path, *, python: str, seed: int = 0, pipeline: str = "qwen3-tts-0.6b"
):
    """Write the checkpoint into ``out`` and register it as a model artifact (a folder of files)."""
    from edgelab.artifacts.registry import add_artifact

    files = write(out, seed, python=python)
    return add_artifact(
        session,
        name,
        [files[k] for k in sorted(files)],
        names=sorted(files),
        kind="model",
        target="any",
        component=pipeline,
        provenance={"recipe": "edgelab.models.qwen3tts_hf", "generator_python": python},
        meta={
            "pipeline": pipeline,
            "role": "hf-checkpoint",
            "format": "hf",
            "weights": "random",
            "seed": seed,
            "geometry": GEOMETRY,
        },
        replace=True,
    )
