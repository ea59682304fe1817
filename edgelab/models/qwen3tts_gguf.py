"""Qwen3-TTS-12Hz as the two GGUF files llama.cpp loads, with random weights, written with ``gguf``.

What a team converting the real checkpoint gets from llama.cpp's own converter
(``convert_hf_to_gguf.py`` and ``--mmproj``, ``conversion/qwen3tts.py`` in the vendored tree
0c1e570), written here without the checkpoint or torch (the converter imports torch; no CPU wheel
of it is reachable from this lab):

- the talker: architecture ``qwen3tts`` (libllama, the Qwen3-VL graph with interleaved M-RoPE,
  ``rope.dimension_sections`` summing to head_dim / 2), a ``gpt2``/``qwen2`` BPE vocabulary of the
  text tokens followed by the 3072 codec rows (``<|codec_N|>``, the rows with a meaning renamed
  from the talker config's ``*_id`` fields, all CONTROL), ``tokenizer.ggml.suppress_tokens`` (the
  top 1024 codec rows but end-of-speech), end-of-speech as EOS, ``token_embd`` (text rows, which
  the converter folds through the text projection, then codec rows) and an ``output`` of width 3072;
- the mmproj (``clip``): the speaker encoder (``qwen3tts_spkenc``, ECAPA-TDNN; the loader insists
  on it even when no speaker file is given) and the gen-audio projector (``qwen3tts_gen``): the
  code predictor under ``a.gen.code`` (15 acoustic codebooks of 2048) and code2wav under
  ``a.gen.wav`` (8 transformer layers and 16 heads fixed in clip.cpp, widths read from the shapes).

Every name and key is checked against the tree's gguf-py and the files are loaded by the real
``llama-tts`` in the tests. The real geometry is the default; ``scale`` shrinks every width (the
fixed counts stay) for a small test model. Random weights never sample end-of-speech on purpose,
so a run bounds its frames. Text tokens are byte-level BPE with a small merge table (the real
151k-entry vocabulary is not shipped): prompts tokenize into more, shorter tokens than Qwen's.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from edgelab.errors import ConfigError

CODEC_VOCAB = 3072  # the talker's codec rows and output width (llama.cpp hard-codes 3072)
CODEBOOK = 2048  # entries per acoustic codebook
ACOUSTIC = 15  # codebooks the code predictor adds to the talker's codebook 0
WAV_LAYERS, WAV_HEADS, WAV_WINDOW = 8, 16, 72  # code2wav transformer: fixed in clip.cpp
DAC_RATES = (8, 5, 4, 3)  # code2wav's DAC upsampling; with the 2 x 2 pre-upsample: 1920 samples a frame
SAMPLES_PER_FRAME = 1920
SAMPLE_RATE = 24000
MEL_BINS = 128
RES2NET_SCALE = 8  # the speaker encoder's Res2Net split: fixed in clip.cpp

# The talker config's codec rows with a meaning (Qwen3-TTS-12Hz CustomVoice): what the converter
# renames from the *_id fields. Languages and speakers as published for the 12 Hz models.
CODEC_IDS: dict[str, int] = {
    "codec_pad": 2148,
    "codec_bos": 2149,
    "codec_eos_token": 2150,
    "codec_think": 2154,
    "codec_nothink": 2155,
    "codec_think_bos": 2156,
    "codec_think_eos": 2157,
}
LANGUAGES = {
    "english": 2050,
    "german": 2052,
    "spanish": 2054,
    "chinese": 2055,
    "japanese": 2058,
    "french": 2061,
    "korean": 2064,
    "russian": 2069,
    "italian": 2070,
}
SPEAKERS = {
    "aiden": 2861,
    "sohee": 2864,
    "ono_anna": 2873,
    "eric": 2875,
    "dylan": 2878,
    "uncle_fu": 3010,
    "ryan": 3061,
    "vivian": 3065,
    "serena": 3066,
}
# Qwen2's text specials at their real ids, and the three Qwen3-TTS adds
TEXT_SPECIALS_REAL = {
    151643: "<|endoftext|>",
    151644: "<|im_start|>",
    151645: "<|im_end|>",
    151671: "<tts_pad>",
    151672: "<tts_text_bos>",
    151673: "<tts_text_eod>",
}
TEXT_VOCAB_REAL = 151936

TOKEN_NORMAL, TOKEN_CONTROL, TOKEN_UNUSED = 1, 3, 5  # gguf.TokenType values


@dataclass(frozen=True)
class Geometry:
    """The shapes of one Qwen3-TTS model; ``scale`` 1.0 is the published configuration."""

    model: str
    scale: float
    hidden: int  # talker hidden (and the speaker embedding, the fed-back codec embedding)
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ff: int
    rope_sections: tuple[int, int, int, int]
    text_vocab: int
    cp_hidden: int  # code predictor
    cp_layers: int
    cp_heads: int
    cp_kv_heads: int
    cp_head_dim: int
    cp_ff: int
    cb_dim: int  # code2wav: codebook vector width
    codebook_dim: int  # quantizer output
    latent: int  # pre_conv out, transformer in/out, upsample width
    wav_hidden: int
    wav_head_dim: int
    wav_ff: int
    decoder_dim: int  # DAC entry width (halves per block)
    spk_channels: int  # speaker encoder
    spk_attention: int
    spk_se: int
    n_ctx: int = 32768
    rms_eps: float = 1e-6
    rope_theta: float = 1_000_000.0

    @property
    def vocab(self) -> int:
        return self.text_vocab + CODEC_VOCAB

    def describe(self) -> dict:
        return {**asdict(self), "vocab": self.vocab, "codec_vocab": CODEC_VOCAB}


_REAL = {
    # talker: hidden, layers, heads, kv, head_dim, ff (config.json talker_config)
    "qwen3-tts-0.6b": (1024, 28, 16, 8, 128, 3072),
    "qwen3-tts-1.7b": (2048, 28, 16, 8, 128, 6144),
}
MODELS = tuple(_REAL)
ALIASES = {"qwen3-tts": "qwen3-tts-0.6b"}


def _width(x: float, step: int, floor: int) -> int:
    return max(floor, int(round(x / step)) * step)


def geometry(model: str, scale: float = 1.0) -> Geometry:
    """The published geometry of ``model`` (0.6B or 1.7B), every width times ``scale`` (0 < scale <= 1).

    What clip.cpp fixes stays: 8 code2wav layers of 16 heads, 3 speaker-encoder blocks of 8
    Res2Net branches, 15 acoustic codebooks of 2048, the 3072 codec rows, 1920 samples a frame.
    """
    model = ALIASES.get(model, model)
    if model not in _REAL:
        raise ConfigError(f"no Qwen3-TTS geometry for {model!r}", remedy=f"one of {', '.join(sorted(_REAL))}")
    if not 0 < scale <= 1:
        raise ConfigError(f"--scale {scale} is out of range", remedy="0 < scale <= 1 (1 is the real model)")
    h, layers, heads, kv, hd, ff = _REAL[model]
    s = scale
    if s == 1:
        return Geometry(
            model, 1.0, h, layers, heads, kv, hd, ff, (24, 20, 20, 0), TEXT_VOCAB_REAL,
            cp_hidden=1024, cp_layers=5, cp_heads=16, cp_kv_heads=8, cp_head_dim=128, cp_ff=3072,
            cb_dim=256, codebook_dim=512, latent=1024, wav_hidden=512, wav_head_dim=64, wav_ff=1024,
            decoder_dim=1536, spk_channels=512, spk_attention=128, spk_se=128,
        )  # fmt: skip
    heads_s = max(2, int(round(heads * math.sqrt(s))))
    kv_s = max(1, heads_s // 2)
    hd_s = _width(hd * math.sqrt(s), 8, 16)
    hidden = _width(h * s, 32, 64)
    half = hd_s // 2  # M-RoPE sections: the published 24:20:20 split of head_dim / 2
    t = int(round(half * 24 / 64))
    sections = (t, (half - t + 1) // 2, half - t - (half - t + 1) // 2, 0)
    return Geometry(
        model,
        s,
        hidden,
        max(1, int(round(layers * s))),
        heads_s,
        kv_s,
        hd_s,
        _width(ff * s, 32, 128),
        sections,
        text_vocab=0,  # set by the vocabulary (the small merge table plus the specials)
        cp_hidden=_width(1024 * s, 32, 64),
        cp_layers=max(1, int(round(5 * s))),
        cp_heads=heads_s,
        cp_kv_heads=kv_s,
        cp_head_dim=hd_s,
        cp_ff=_width(3072 * s, 32, 128),
        cb_dim=_width(256 * s, 8, 16),
        codebook_dim=_width(512 * s, 16, 32),
        latent=_width(1024 * s, 16, 64),
        wav_hidden=_width(512 * s, 16, 32),
        wav_head_dim=_width(64 * math.sqrt(s), 4, 4),
        wav_ff=_width(1024 * s, 16, 64),
        decoder_dim=_width(1536 * s, 16, 64),
        spk_channels=_width(512 * s, RES2NET_SCALE * 2, RES2NET_SCALE * 8),
        spk_attention=_width(128 * s, 8, 16),
        spk_se=_width(128 * s, 8, 16),
    )


# ------------------------------------------------------------------------------- vocabulary


def _byte_table() -> list[tuple[int, str]]:
    """GPT-2's byte-level alphabet (bytes_to_unicode): (byte, symbol) in its order, which is the
    order Qwen2's vocabulary opens with (printable bytes first, then the rest shifted past 255)."""
    bs = (
        list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    )
    cs = bs[:]
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + len(cs) - 188)  # 188 printable bytes keep their code point
    return [(b, chr(c)) for b, c in zip(bs, cs, strict=True)]


def byte_symbols() -> list[str]:
    return [c for _, c in _byte_table()]


def _merges() -> list[tuple[str, str]]:
    """A small deterministic merge table over lowercase words: Ġx, xy, Ġxy (1378 merges)."""
    sym = dict(_byte_table())
    space = sym[ord(" ")]
    letters = [sym[c] for c in range(ord("a"), ord("z") + 1)]
    out = [(space, a) for a in letters]
    out += [(a, b) for a in letters for b in letters]
    out += [(space + a, b) for a in letters for b in letters]
    return out


def codec_names() -> list[str]:
    """The 3072 codec rows' token texts, as the converter names them (``<|codec_N|>``, renamed rows)."""
    names = [f"<|codec_{i}|>" for i in range(CODEC_VOCAB)]
    for key, idx in CODEC_IDS.items():
        names[idx] = f"<|{key}|>"
    for lang, idx in LANGUAGES.items():
        names[idx] = f"<|codec_language_{lang}|>"
    for spk, idx in SPEAKERS.items():
        names[idx] = f"<|spk_{spk}|>"
    return names


@dataclass
class Vocab:
    tokens: list[str]
    types: list[int]
    merges: list[str]
    text_vocab: int
    specials: dict[str, int]  # text -> id of the text specials

    @property
    def size(self) -> int:
        return len(self.tokens)

    def codec(self, name: str) -> int:
        return self.text_vocab + codec_names().index(name)


def vocabulary(real: bool) -> Vocab:
    """Byte symbols, the merge table's tokens, the text specials (at Qwen2's ids for the real size,
    else right after), ``[PAD{i}]`` holes (UNUSED, as the converter writes them), then the codec rows."""
    merges = _merges()
    tokens = list(byte_symbols())
    tokens += [a + b for a, b in merges]
    types = [TOKEN_NORMAL] * len(tokens)
    if real:
        size = TEXT_VOCAB_REAL
        specials = TEXT_SPECIALS_REAL
    else:
        base = len(tokens)
        names = list(TEXT_SPECIALS_REAL.values())
        specials = {base + i: n for i, n in enumerate(names)}
        size = int(math.ceil((base + len(names)) / 64) * 64)
    for i in range(len(tokens), size):
        if i in specials:
            tokens.append(specials[i])
            types.append(TOKEN_CONTROL)
        else:
            tokens.append(f"[PAD{i}]")
            types.append(TOKEN_UNUSED)
    text_vocab = len(tokens)
    tokens += codec_names()
    types += [TOKEN_CONTROL] * CODEC_VOCAB
    return Vocab(
        tokens,
        types,
        [f"{a} {b}" for a, b in merges],
        text_vocab,
        {name: i for i, name in specials.items()},
    )


# ------------------------------------------------------------------------------- tensors


@dataclass(frozen=True)
class Tensor:
    """One tensor to write: its numpy shape (ggml's ne reversed), type and how to draw it."""

    name: str
    shape: tuple[int, ...]
    dtype: type  # np.float16 | np.float32
    init: str  # "normal" (std, default 0.02), "fan_in" (std / sqrt(fan in), std default 1), "ones", "zeros", "snake"
    std: float | None = None

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize


def _draw(t: Tensor, seed: int) -> np.ndarray:
    """The tensor's values from a generator seeded by (seed, name): the same file for the same seed,
    whatever else the file holds."""
    digest = hashlib.sha256(f"{seed}\0{t.name}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    if t.init == "ones":
        return np.ones(t.shape, dtype=t.dtype)
    if t.init == "zeros":
        return np.zeros(t.shape, dtype=t.dtype)
    if t.init == "snake":  # SnakeBeta, folded as the converter does: exp(alpha), 1 / (exp(beta) + 1e-9)
        return (1.0 + 0.1 * rng.standard_normal(t.shape, dtype=np.float32)).astype(t.dtype)
    std = 0.02 if t.std is None else t.std
    if t.init == "fan_in":  # variance kept through the layer, so deep conv stacks neither vanish nor blow up
        fan = int(np.prod(t.shape[1:])) if len(t.shape) > 1 else t.shape[0]
        std = (1.0 if t.std is None else t.std) / math.sqrt(max(1, fan))
    out = np.empty(t.shape, dtype=t.dtype)
    flat = out.reshape(-1)
    step = 1 << 24  # draw in slices: a 3 GB tensor never needs a float32 copy of itself
    for i in range(0, flat.size, step):
        n = min(step, flat.size - i)
        flat[i : i + n] = rng.standard_normal(n, dtype=np.float32) * np.float32(std)
    return out


F16, F32 = np.float16, np.float32


def talker_tensors(g: Geometry) -> list[Tensor]:
    """The talker's tensors (llama-model.cpp, qwen3vl loader with the qwen3tts output width)."""
    q, kv = g.heads * g.head_dim, g.kv_heads * g.head_dim
    ts = [
        Tensor("token_embd.weight", (g.vocab, g.hidden), F16, "normal"),
        Tensor("output_norm.weight", (g.hidden,), F32, "ones"),
        Tensor("output.weight", (CODEC_VOCAB, g.hidden), F16, "normal"),
    ]
    for i in range(g.layers):
        b = f"blk.{i}"
        ts += [
            Tensor(f"{b}.attn_norm.weight", (g.hidden,), F32, "ones"),
            Tensor(f"{b}.attn_q.weight", (q, g.hidden), F16, "normal"),
            Tensor(f"{b}.attn_k.weight", (kv, g.hidden), F16, "normal"),
            Tensor(f"{b}.attn_v.weight", (kv, g.hidden), F16, "normal"),
            Tensor(f"{b}.attn_output.weight", (g.hidden, q), F16, "normal"),
            Tensor(f"{b}.attn_q_norm.weight", (g.head_dim,), F32, "ones"),
            Tensor(f"{b}.attn_k_norm.weight", (g.head_dim,), F32, "ones"),
            Tensor(f"{b}.ffn_norm.weight", (g.hidden,), F32, "ones"),
            Tensor(f"{b}.ffn_gate.weight", (g.ff, g.hidden), F16, "normal"),
            Tensor(f"{b}.ffn_up.weight", (g.ff, g.hidden), F16, "normal"),
            Tensor(f"{b}.ffn_down.weight", (g.hidden, g.ff), F16, "normal"),
        ]
    return ts


def _conv(name: str, oc: int, ic: int, k: int, dtype: type = F16, gain: float = 1.0) -> list[Tensor]:
    """A Conv1d: weight (oc, ic, k) as PyTorch keeps it (ggml ne [k, ic, oc]), bias (oc,)."""
    return [
        Tensor(f"{name}.weight", (oc, ic, k), dtype, "fan_in", gain),
        Tensor(f"{name}.bias", (oc,), F32, "zeros"),
    ]


def _linear(
    name: str, out: int, inp: int, dtype: type = F16, bias: bool = True, gain: float = 1.0
) -> list[Tensor]:
    ts = [Tensor(f"{name}.weight", (out, inp), dtype, "fan_in", gain)]
    if bias:
        ts.append(Tensor(f"{name}.bias", (out,), F32, "zeros"))
    return ts


def speaker_tensors(g: Geometry) -> list[Tensor]:
    """The ECAPA-TDNN speaker encoder (clip.cpp PROJECTOR_TYPE_QWEN3TTS_SPKENC): stem k5, three
    SE-Res2Net blocks (k1, 7 Res2Net k3 branches, k1, squeeze-excitation), aggregation, attentive
    statistics pooling, the projection to the talker's width."""
    c, br = g.spk_channels, g.spk_channels // RES2NET_SCALE
    ts = _conv("a.conv1d.0", c, MEL_BINS, 5)
    for bid in (1, 2, 3):
        ts += _conv(f"a.blk.{bid}.conv_pw1", c, c, 1)
        for x in range(RES2NET_SCALE - 1):
            ts += _conv(f"a.blk.{bid}.res2.{x}", br, br, 3)
        ts += _conv(f"a.blk.{bid}.conv_pw2", c, c, 1)
        ts += _conv(f"a.blk.{bid}.se_conv1", g.spk_se, c, 1)
        ts += _conv(f"a.blk.{bid}.se_conv2", c, g.spk_se, 1)
    ts += _conv("a.conv_out", 3 * c, 3 * c, 1)
    ts += _conv("a.asp_tdnn", g.spk_attention, 9 * c, 1)
    ts += _conv("a.asp_attn", 3 * c, g.spk_attention, 1)
    ts += _conv("mm.a.fc", g.hidden, 6 * c, 1)
    return ts


def code_predictor_tensors(g: Geometry) -> list[Tensor]:
    """The code predictor (GEN_CODE): per-codebook embeddings at the talker's width, the projection
    to its own width when they differ, its layers, one head per acoustic codebook, and the talker's
    codec embedding (fed back each frame)."""
    h, q, kv = g.cp_hidden, g.cp_heads * g.cp_head_dim, g.cp_kv_heads * g.cp_head_dim
    ts: list[Tensor] = []
    if g.hidden != h:
        ts += _linear("a.gen.code.proj_in", h, g.hidden)
    ts += [
        Tensor("a.gen.code.embd.weight", (ACOUSTIC, CODEBOOK, g.hidden), F16, "normal"),
        Tensor("a.gen.code.head.weight", (ACOUSTIC, CODEBOOK, h), F16, "fan_in"),
        Tensor("a.gen.code.out_embd.weight", (CODEC_VOCAB, g.hidden), F16, "normal"),
        Tensor("a.gen.code.output_norm.weight", (h,), F32, "ones"),
    ]
    for i in range(g.cp_layers):
        b = f"a.gen.code.blk.{i}"
        ts += [
            Tensor(f"{b}.ln1.weight", (h,), F32, "ones"),
            Tensor(f"{b}.attn_q.weight", (q, h), F16, "normal"),
            Tensor(f"{b}.attn_q_norm.weight", (g.cp_head_dim,), F32, "ones"),
            Tensor(f"{b}.attn_k.weight", (kv, h), F16, "normal"),
            Tensor(f"{b}.attn_k_norm.weight", (g.cp_head_dim,), F32, "ones"),
            Tensor(f"{b}.attn_v.weight", (kv, h), F16, "normal"),
            Tensor(f"{b}.attn_out.weight", (h, q), F16, "normal"),
            Tensor(f"{b}.ln2.weight", (h,), F32, "ones"),
            Tensor(f"{b}.ffn_gate.weight", (g.cp_ff, h), F16, "normal"),
            Tensor(f"{b}.ffn_up.weight", (g.cp_ff, h), F16, "normal"),
            # the converter keeps it F32: the real FFN's intermediate exceeds F16's range
            Tensor(f"{b}.ffn_down.weight", (h, g.cp_ff), F32, "normal"),
        ]
    return ts


def code2wav_tensors(g: Geometry) -> list[Tensor]:
    """code2wav (GEN_WAV): RVQ decode (codebook 0 and the 15 acoustic ones), causal pre-conv k3,
    the 8-layer sliding-window transformer, two 2x upsample blocks (ConvTranspose + ConvNeXt) and
    the DAC decoder (4 blocks of SnakeBeta, ConvTranspose with kernel 2 x rate and 3 residual units
    at dilations 1, 3, 9), SnakeBeta and a k7 conv to one channel. Kernels are F16, transposed
    kernels F32 (ggml has no BF16 path for them), as the converter forces."""
    w = "a.gen.wav"
    q = WAV_HEADS * g.wav_head_dim
    ts = [
        Tensor(f"{w}.quant.first.in_proj.weight", (g.cb_dim, g.codebook_dim), F16, "fan_in"),
        Tensor(f"{w}.quant.first.out_proj.weight", (g.codebook_dim, g.cb_dim), F16, "fan_in"),
        Tensor(f"{w}.quant.first.codebook.weight", (CODEBOOK, g.cb_dim), F32, "normal", 1.0),
        Tensor(f"{w}.quant.rest.in_proj.weight", (g.cb_dim, g.codebook_dim), F16, "fan_in"),
        Tensor(f"{w}.quant.rest.out_proj.weight", (g.codebook_dim, g.cb_dim), F16, "fan_in", 0.25),
        Tensor(f"{w}.quant.rest.codebook.weight", (ACOUSTIC, CODEBOOK, g.cb_dim), F32, "normal", 1.0),
    ]
    ts += _conv(f"{w}.pre_conv", g.latent, g.codebook_dim, 3)
    ts += _linear(f"{w}.tfm.in_proj", g.wav_hidden, g.latent)
    ts += _linear(f"{w}.tfm.out_proj", g.latent, g.wav_hidden)
    ts.append(Tensor(f"{w}.tfm.output_norm.weight", (g.wav_hidden,), F32, "ones"))
    for i in range(WAV_LAYERS):
        b = f"{w}.tfm.blk.{i}"
        ts += [
            Tensor(f"{b}.ln1.weight", (g.wav_hidden,), F32, "ones"),
            Tensor(f"{b}.attn_q.weight", (q, g.wav_hidden), F16, "fan_in"),
            Tensor(f"{b}.attn_k.weight", (q, g.wav_hidden), F16, "fan_in"),
            Tensor(f"{b}.attn_v.weight", (q, g.wav_hidden), F16, "fan_in"),
            Tensor(f"{b}.attn_out.weight", (g.wav_hidden, q), F16, "fan_in"),
            Tensor(f"{b}.ls1.weight", (g.wav_hidden,), F32, "normal", 0.01),
            Tensor(f"{b}.ln2.weight", (g.wav_hidden,), F32, "ones"),
            Tensor(f"{b}.ffn_gate.weight", (g.wav_ff, g.wav_hidden), F16, "fan_in"),
            Tensor(f"{b}.ffn_up.weight", (g.wav_ff, g.wav_hidden), F16, "fan_in"),
            Tensor(f"{b}.ffn_down.weight", (g.wav_hidden, g.wav_ff), F16, "fan_in"),
            Tensor(f"{b}.ls2.weight", (g.wav_hidden,), F32, "normal", 0.01),
        ]
    for i in range(2):
        b = f"{w}.up.blk.{i}"
        ts += [
            Tensor(f"{b}.conv.weight", (g.latent, g.latent, 2), F32, "fan_in"),
            Tensor(f"{b}.conv.bias", (g.latent,), F32, "zeros"),
            Tensor(f"{b}.dwconv.weight", (g.latent, 1, 7), F16, "fan_in"),
            Tensor(f"{b}.dwconv.bias", (g.latent,), F32, "zeros"),
            Tensor(f"{b}.norm.weight", (g.latent,), F32, "ones"),
            Tensor(f"{b}.norm.bias", (g.latent,), F32, "zeros"),
            *_linear(f"{b}.pw1", 4 * g.latent, g.latent),
            *_linear(f"{b}.pw2", g.latent, 4 * g.latent),
            Tensor(f"{b}.gamma", (g.latent,), F32, "normal", 0.1),
        ]
    ts += _conv(f"{w}.dac.entry", g.decoder_dim, g.latent, 7)
    c = g.decoder_dim
    for i, rate in enumerate(DAC_RATES):
        b = f"{w}.dac.blk.{i}"
        out = c // 2
        ts += [
            Tensor(f"{b}.snake.alpha", (c,), F32, "snake"),
            Tensor(f"{b}.snake.beta", (c,), F32, "snake"),
            Tensor(f"{b}.conv.weight", (c, out, 2 * rate), F32, "fan_in"),
            Tensor(f"{b}.conv.bias", (out,), F32, "zeros"),
        ]
        for x in range(3):
            r = f"{b}.res.{x}"
            ts += [
                Tensor(f"{r}.act1.alpha", (out,), F32, "snake"),
                Tensor(f"{r}.act1.beta", (out,), F32, "snake"),
                *_conv(f"{r}.conv1", out, out, 7),
                Tensor(f"{r}.act2.alpha", (out,), F32, "snake"),
                Tensor(f"{r}.act2.beta", (out,), F32, "snake"),
                *_conv(f"{r}.conv2", out, out, 1, gain=0.5),
            ]
        c = out
    ts += [
        Tensor(f"{w}.dac.post_snake.alpha", (c,), F32, "snake"),
        Tensor(f"{w}.dac.post_snake.beta", (c,), F32, "snake"),
    ]
    ts += _conv(f"{w}.dac.post_conv", 1, c, 7, gain=0.15)  # a signal that neither vanishes nor clips
    return ts


# ------------------------------------------------------------------------------- writers


def _write(
    path: Path, arch: str, kv: Callable[[object], None], tensors: list[Tensor], seed: int, file_type: int
) -> Path:
    """Header, metadata, tensor infos, then the tensors one at a time (never all in memory)."""
    import gguf

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".partial")
    w = gguf.GGUFWriter(str(tmp), arch)
    kv(w)
    w.add_file_type(file_type)
    for t in tensors:
        w.add_tensor_info(t.name, t.shape, np.dtype(t.dtype), t.nbytes)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for t in tensors:
        w.write_tensor_data(_draw(t, seed))
    w.close()
    os.replace(tmp, path)
    return path


def write_talker(path: Path, g: Geometry, *, seed: int = 0, name: str | None = None) -> Path:
    """The talker GGUF (architecture qwen3tts), F16 weights and F32 norms."""
    import gguf

    voc = vocabulary(real=g.scale == 1)
    if voc.text_vocab != g.text_vocab:
        g = _with_text_vocab(g, voc.text_vocab)
    eos = voc.codec("<|codec_eos_token|>")

    def kv(w) -> None:
        w.add_name(name or g.model)
        w.add_context_length(g.n_ctx)
        w.add_embedding_length(g.hidden)
        w.add_block_count(g.layers)
        w.add_feed_forward_length(g.ff)
        w.add_head_count(g.heads)
        w.add_head_count_kv(g.kv_heads)
        w.add_key_length(g.head_dim)
        w.add_value_length(g.head_dim)
        w.add_rope_dimension_sections(list(g.rope_sections))
        w.add_rope_freq_base(g.rope_theta)
        w.add_layer_norm_rms_eps(g.rms_eps)
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("qwen2")
        w.add_token_list(voc.tokens)
        w.add_token_types(voc.types)
        w.add_token_merges(voc.merges)
        w.add_bos_token_id(voc.specials["<|endoftext|>"])
        w.add_pad_token_id(voc.specials["<|endoftext|>"])
        w.add_eos_token_id(eos)
        w.add_add_bos_token(False)
        w.add_add_eos_token(False)
        suppress = [i for i in range(voc.size - 1024, voc.size) if i != eos]
        w.add_array("tokenizer.ggml.suppress_tokens", suppress)

    return _write(Path(path), "qwen3tts", kv, talker_tensors(g), seed, int(gguf.LlamaFileType.MOSTLY_F16))


def write_mmproj(path: Path, g: Geometry, *, seed: int = 0, name: str | None = None) -> Path:
    """The mmproj GGUF (clip): speaker encoder + code predictor + code2wav."""
    import gguf

    def kv(w) -> None:
        w.add_name(f"{name or g.model} mmproj")
        w.add_bool("clip.has_vision_encoder", False)
        w.add_bool("clip.has_audio_encoder", True)
        w.add_string("clip.audio.projector_type", "qwen3tts_spkenc")
        w.add_uint32("clip.audio.projection_dim", g.hidden)
        w.add_uint32("clip.audio.num_mel_bins", MEL_BINS)
        w.add_uint32("clip.audio.block_count", 3)
        w.add_uint32("clip.audio.embedding_length", 3 * g.spk_channels)
        w.add_uint32("clip.audio.attention.head_count", 1)
        w.add_uint32("clip.audio.feed_forward_length", 3 * g.spk_channels)
        w.add_float32("clip.audio.attention.layer_norm_epsilon", 1e-5)
        w.add_bool("clip.has_gen_audio_encoder", True)
        w.add_string("clip.gen.audio.projector_type", "qwen3tts_gen")
        w.add_uint32("clip.gen.audio.projection_dim", g.hidden)
        w.add_uint32("clip.gen.audio.embedding_length", g.cp_hidden)
        w.add_uint32("clip.gen.audio.feed_forward_length", g.cp_ff)
        w.add_uint32("clip.gen.audio.block_count", g.cp_layers)
        w.add_uint32("clip.gen.audio.attention.head_count", g.cp_heads)
        w.add_uint32("clip.gen.audio.attention.head_count_kv", g.cp_kv_heads)
        w.add_float32("clip.gen.audio.attention.layer_norm_epsilon", g.rms_eps)

    tensors = speaker_tensors(g) + code_predictor_tensors(g) + code2wav_tensors(g)
    return _write(Path(path), "clip", kv, tensors, seed, int(gguf.LlamaFileType.MOSTLY_F16))


def _with_text_vocab(g: Geometry, n: int) -> Geometry:
    from dataclasses import replace

    return replace(g, text_vocab=n)


def resolved(g: Geometry) -> Geometry:
    """``g`` with the text vocabulary the writer gives it (known only once the vocabulary is built)."""
    return _with_text_vocab(g, vocabulary(real=g.scale == 1).text_vocab)


def parameter_counts(g: Geometry) -> dict[str, int]:
    """Parameters per file and stage, counted from the tensors written."""

    def count(ts: Iterator[Tensor] | list[Tensor]) -> int:
        return sum(int(np.prod(t.shape)) for t in ts)

    g = resolved(g)
    return {
        "talker": count(talker_tensors(g)),
        "speaker_encoder": count(speaker_tensors(g)),
        "code_predictor": count(code_predictor_tensors(g)),
        "code2wav": count(code2wav_tensors(g)),
    }


__all__ = [
    "ACOUSTIC",
    "ALIASES",
    "MODELS",
    "CODEC_VOCAB",
    "Geometry",
    "SAMPLES_PER_FRAME",
    "geometry",
    "parameter_counts",
    "resolved",
    "talker_tensors",
    "vocabulary",
    "write_mmproj",
    "write_talker",
]
