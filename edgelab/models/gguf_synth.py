"""A random-weight GGUF text model of the ``llama`` architecture, written with ``gguf``.

The lab needs a model that really loads and runs in llama.cpp, sized so that tokens/s mean
something, without downloading one. The weights are random (normal, std 0.02): the text it
produces is noise and every result that uses it says ``weights: random``; timings and memory are
those of a real model of that shape.

What llama.cpp's loader needs (checked against the vendored llama.cpp): ``llama.*`` hyper-
parameters with ``rope.dimension_count`` equal to the head dimension (else "invalid n_rot"), an
SPM vocabulary (``tokenizer.ggml.model = llama``) that includes the 256 byte tokens ``<0x00>``..
``<0xFF>`` for byte fallback, and tensors ``token_embd``, ``output_norm`` and per layer
``attn_norm``, ``attn_q/k/v/output``, ``ffn_norm``, ``ffn_gate/up/down`` (``output`` is left out:
tied to the embedding).
"""

from __future__ import annotations

import itertools
import math
import re
import string
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from edgelab.errors import ConfigError

ARCH = "llama"
HEAD_DIM = 64
_WIDTHS = (64, 128, 192, 256, 384, 512, 640, 768, 1024, 1280, 1536, 2048, 2560, 3072, 4096)
_SUFFIX = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9}


def parse_params(text: str | int) -> int:
    """``100M`` -> 100_000_000; ``1.5B``, ``500K``, plain integers."""
    if isinstance(text, int):
        return text
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmMbBgG]?)\s*", str(text))
    if not m:
        raise ConfigError(f"cannot read a parameter count from {text!r}", remedy="e.g. 100M, 1.5B, 4M")
    value = int(float(m.group(1)) * _SUFFIX[m.group(2).lower()])
    if value < 100_000:
        raise ConfigError(f"{text} parameters is too small for a model", remedy="ask for 1M or more")
    return value


@dataclass(frozen=True)
class SynthConfig:
    """The shape of a synthetic model; ``params`` is the exact count the tensors hold."""

    vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_ff: int
    n_ctx: int
    params: int

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


def _round_up(x: float, step: int) -> int:
    return int(math.ceil(x / step) * step)


def _layer_params(d: int, heads: int, kv: int, ff: int) -> int:
    hd = d // heads
    return 2 * d + 2 * d * heads * hd + 2 * d * kv * hd + 3 * d * ff


def _shape(d: int) -> tuple[int, int, int]:
    heads = max(1, d // HEAD_DIM)
    kv = heads if d < 1024 else max(1, heads // 4)  # GQA for the wide ones, as real models do
    ff = _round_up(8 * d / 3, 256 if d >= 256 else 32)  # K-quants need rows of 256
    return heads, kv, ff


def config_for(params: int, *, vocab: int | None = None, n_ctx: int = 2048) -> SynthConfig:
    """The llama-shaped config closest to ``params``, with a depth proportional to the width
    (about one layer per 64 channels, as small real models have)."""
    vocab = vocab or (32000 if params >= 50_000_000 else 8192 if params >= 10_000_000 else 2048)
    if vocab < 300:
        raise ConfigError(
            f"vocabulary of {vocab} is too small", remedy="at least 300 (3 specials + 256 bytes)"
        )
    best: tuple[float, SynthConfig] | None = None
    for d in _WIDTHS:
        heads, kv, ff = _shape(d)
        per_layer = _layer_params(d, heads, kv, ff)
        fixed = vocab * d + d  # token_embd + output_norm
        layers = round((params - fixed) / per_layer)
        if layers < 1:
            continue
        want = max(2.0, d / 64)
        score = abs(math.log(layers / want))
        cfg = SynthConfig(vocab, d, layers, heads, kv, ff, n_ctx, fixed + layers * per_layer)
        if best is None or score < best[0]:
            best = (score, cfg)
    if best is None:
        raise ConfigError(
            f"{params} parameters cannot hold a {vocab}-token embedding",
            remedy="ask for more parameters or --vocab",
        )
    return best[1]


def vocabulary(size: int) -> tuple[list[str], list[float], list[int]]:
    """``size`` SPM pieces: <unk> <s> </s>, the 256 byte tokens, then distinct word pieces
    (each also as a word start, ``▁``-prefixed). A running set keeps it O(n)."""
    import gguf

    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    types += [gguf.TokenType.BYTE] * 256
    seen = set(tokens)
    pieces: list[str] = []
    alphabet = string.ascii_lowercase
    singles = list(alphabet) + list(string.digits) + list(".,!?;:'\"-()")

    def gen():
        yield "▁"
        for c in singles:
            yield "▁" + c
            yield c
        for n in itertools.count(2):
            for combo in itertools.product(alphabet, repeat=n):
                w = "".join(combo)
                yield "▁" + w
                yield w

    need = size - len(tokens)
    for piece in gen():
        if len(pieces) >= need:
            break
        if piece not in seen:
            seen.add(piece)
            pieces.append(piece)
    tokens += pieces
    types += [gguf.TokenType.NORMAL] * len(pieces)
    scores = [0.0] * 259 + [-float(i) for i in range(len(pieces))]  # earlier pieces merge first
    return tokens, scores, [int(t) for t in types]


def write_gguf(path: Path, cfg: SynthConfig, *, seed: int = 0, name: str = "synth") -> Path:
    """Write ``cfg`` as an F16 GGUF (norms F32) with weights drawn from N(0, 0.02) by ``seed``."""
    import gguf

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(path), ARCH)
    w.add_name(name)
    w.add_context_length(cfg.n_ctx)
    w.add_embedding_length(cfg.n_embd)
    w.add_block_count(cfg.n_layer)
    w.add_feed_forward_length(cfg.n_ff)
    w.add_head_count(cfg.n_head)
    w.add_head_count_kv(cfg.n_head_kv)
    w.add_rope_dimension_count(cfg.head_dim)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(cfg.vocab)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
    tokens, scores, types = vocabulary(cfg.vocab)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    def mat(rows: int, cols: int) -> np.ndarray:  # numpy (rows, cols) is ggml ne = [cols, rows]
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    d, hd = cfg.n_embd, cfg.head_dim
    ones = np.ones(d, dtype=np.float32)
    w.add_tensor("token_embd.weight", mat(cfg.vocab, d))
    w.add_tensor("output_norm.weight", ones)
    for i in range(cfg.n_layer):
        w.add_tensor(f"blk.{i}.attn_norm.weight", ones)
        w.add_tensor(f"blk.{i}.attn_q.weight", mat(cfg.n_head * hd, d))
        w.add_tensor(f"blk.{i}.attn_k.weight", mat(cfg.n_head_kv * hd, d))
        w.add_tensor(f"blk.{i}.attn_v.weight", mat(cfg.n_head_kv * hd, d))
        w.add_tensor(f"blk.{i}.attn_output.weight", mat(d, cfg.n_head * hd))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
        w.add_tensor(f"blk.{i}.ffn_gate.weight", mat(cfg.n_ff, d))
        w.add_tensor(f"blk.{i}.ffn_up.weight", mat(cfg.n_ff, d))
        w.add_tensor(f"blk.{i}.ffn_down.weight", mat(d, cfg.n_ff))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def describe(cfg: SynthConfig) -> dict:
    return {**asdict(cfg), "head_dim": cfg.head_dim, "architecture": ARCH}


__all__ = ["ARCH", "SynthConfig", "config_for", "describe", "parse_params", "vocabulary", "write_gguf"]
