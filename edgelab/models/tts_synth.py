"""``edgelab model synth qwen3-tts-0.6b``: the talker and mmproj GGUFs, registered as two models.

The files come from :mod:`edgelab.models.qwen3tts_gguf` (random weights, real geometry unless
``scale`` < 1); the talker can be quantized with the lab's own ``llama-quantize`` (the mmproj
stays F16/F32, as the converter leaves it). Both are ``kind: model`` artifacts of the pipeline,
told apart by ``meta.role`` (``talker``, ``mmproj``): what the llama.cpp launch templates bind to
``{model}`` and ``{mmproj}``. Their metadata says ``weights: random``. Files live in the cache
(``<cache>/models/``): the same model, scale, seed and quant give the same bytes, made once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sqlmodel import Session

from edgelab.artifacts.registry import add_artifact
from edgelab.errors import EdgelabError
from edgelab.models import qwen3tts_gguf as q3
from edgelab.models.synth import QUANTS, find_product, quantized
from edgelab.runtimes.cache import cache_root, locked
from edgelab.store.artifacts import Artifact

LAYOUT_OF = "llama.cpp 0c1e570 (conversion/qwen3tts.py, tools/mtmd/clip.cpp)"


def is_tts(name: str) -> bool:
    """Whether ``name`` is a Qwen3-TTS model this synth writes (``qwen3-tts``, ``qwen3-tts-0.6b``, ...)."""
    return q3.ALIASES.get(name, name) in q3.MODELS


@dataclass(frozen=True)
class TTSFiles:
    model: str
    talker: Path
    talker_f16: Path
    mmproj: Path
    quant: str
    geometry: q3.Geometry

    def meta(self, role: str) -> dict:
        g = self.geometry
        counts = q3.parameter_counts(g)
        return {
            "weights": "random",
            "format": "gguf",
            "pipeline": self.model,
            "role": role,
            "architecture": "qwen3tts" if role == "talker" else "clip",
            "quant": self.quant if role == "talker" else "f16",
            "scale": g.scale,
            "params": counts["talker"]
            if role == "talker"
            else counts["speaker_encoder"] + counts["code_predictor"] + counts["code2wav"],
            "params_by_stage": counts,
            "sample_rate": q3.SAMPLE_RATE,
            "samples_per_frame": q3.SAMPLES_PER_FRAME,
            "recipe": {"generator": "edgelab.models.qwen3tts_gguf", "layout": LAYOUT_OF, **g.describe()},
            "note": "random weights never sample end-of-speech on purpose: bound the frames (-n)",
        }


def _tag(scale: float) -> str:
    return "x1" if scale == 1 else f"x{scale:g}"


def tts_files(
    model: str,
    *,
    scale: float = 1.0,
    quant: str | None = None,
    seed: int = 0,
    out_dir: Path | None = None,
    quantizer: Path | None = None,
    progress=None,
) -> TTSFiles:
    """Write (or reuse) the two GGUFs; ``quantizer`` is needed only for a quantized talker."""
    quant = (quant or "f16").lower()
    if quant not in QUANTS:
        raise EdgelabError(f"unknown quantization {quant!r}", remedy=f"one of: {', '.join(QUANTS)}")
    g = q3.resolved(q3.geometry(model, scale))
    folder = Path(out_dir) if out_dir else cache_root() / "models"
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{g.model}-{_tag(g.scale)}-s{seed}"
    talker_f16 = folder / f"{stem}-talker-f16.gguf"
    mmproj = folder / f"{stem}-mmproj-f16.gguf"
    counts = q3.parameter_counts(g)
    with locked(folder / f".{stem}.lock"):
        if not talker_f16.is_file():
            if progress:
                progress(
                    f"writing {talker_f16.name}: {counts['talker']:,} parameters "
                    f"({g.layers} layers x {g.hidden}, vocabulary {g.vocab:,})"
                )
            q3.write_talker(talker_f16, g, seed=seed, name=g.model)
        if not mmproj.is_file():
            if progress:
                rest = counts["speaker_encoder"] + counts["code_predictor"] + counts["code2wav"]
                progress(
                    f"writing {mmproj.name}: {rest:,} parameters (speaker encoder, code predictor, code2wav)"
                )
            q3.write_mmproj(mmproj, g, seed=seed, name=g.model)
        talker = talker_f16
        if quant != "f16":
            talker = quantized(
                quantizer,
                talker_f16,
                folder / f"{stem}-talker-{quant}.gguf",
                quant,
                what="the talker ",
                progress=progress,
                threads=max(1, (os.cpu_count() or 2) // 2),
            )
    return TTSFiles(g.model, talker, talker_f16, mmproj, quant, g)


def synth_tts(
    session: Session,
    model: str,
    *,
    scale: float = 1.0,
    quant: str | None = None,
    seed: int = 0,
    out_dir: Path | None = None,
    quantizer: Path | None = None,
    progress=None,
) -> list[Artifact]:
    """Make the files and register them: ``MODEL`` (the talker) and ``MODEL-mmproj``, target ``any``."""
    if quant and quant.lower() != "f16" and quantizer is None:
        quantizer = find_product(session, "llama-quantize")
    f = tts_files(
        model, scale=scale, quant=quant, seed=seed, out_dir=out_dir, quantizer=quantizer, progress=progress
    )
    provenance = {
        "recipe": f"edgelab model synth {f.model} (random weights, {LAYOUT_OF})",
        "precision": f.quant,
        "quantization": f.quant,
    }
    if quantizer is not None and f.quant != "f16":
        provenance["toolchain"] = f"llama-quantize {quantizer}"
    arts = []
    for name, path, role in ((f.model, f.talker, "talker"), (f"{f.model}-mmproj", f.mmproj, "mmproj")):
        arts.append(
            add_artifact(
                session,
                name,
                [path],
                kind="model",
                target="any",
                component=f.model,
                provenance=provenance if role == "talker" else {**provenance, "precision": "f16"},
                meta=f.meta(role),
                replace=True,
            )
        )
    return arts


__all__ = ["TTSFiles", "is_tts", "synth_tts", "tts_files"]
