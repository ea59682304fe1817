"""``edgelab model synth``: write a random-weight GGUF, quantize it, register it as a model.

The F16 file comes from :mod:`edgelab.models.gguf_synth`; quantization runs the lab's own
``llama-quantize`` (a registered llama.cpp runtime artifact for this host, or a path). The
artifact's metadata says ``weights: random`` so no result that uses it can pass for a real one.
Files live in the cache (``<cache>/models/``): the same name, size, seed and quant give the
same bytes, so they are made once.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sqlmodel import Session, select

from edgelab.artifacts.registry import add_artifact, artifact_files
from edgelab.errors import EdgelabError, NotFound, QuantizeError
from edgelab.models.gguf_synth import ARCH, config_for, describe, parse_params, write_gguf
from edgelab.runtimes.build import host_platform
from edgelab.runtimes.cache import cache_root, locked
from edgelab.store.artifacts import Artifact

QUANTS = ("f16", "q8_0", "q6_k", "q5_k_m", "q5_0", "q4_k_m", "q4_k_s", "q4_0", "q3_k_m", "q2_k")


@dataclass(frozen=True)
class SynthResult:
    path: Path
    f16_path: Path
    quant: str
    meta: dict


def host_target() -> str:
    os_name, arch = host_platform()
    return f"{os_name}-{arch}"


def find_product(session: Session, product: str, target: str | None = None) -> Path:
    """The file of the registered llama.cpp runtime artifact ``product`` for ``target`` (this
    host's by default): what ``edgelab runtime build llama.cpp`` registered."""
    target = target or host_target()
    for art in session.exec(
        select(Artifact).where(Artifact.kind == "runtime", Artifact.target == target)
    ).all():
        if (art.meta or {}).get("product") == product:
            files = artifact_files(session, art)
            if files and files[0].source and Path(files[0].source).is_file():
                return Path(files[0].source)
    raise NotFound(
        f"no {product} built for {target}",
        remedy=f"edgelab runtime build llama.cpp --target {target} --source PATH (or pass the binary's path)",
    )


def quantize(binary: Path, src: Path, dst: Path, quant: str, *, threads: int = 1) -> Path:
    """``llama-quantize SRC DST TYPE THREADS``; the output appears only when it succeeded."""
    tmp = dst.with_name(dst.name + ".partial")
    argv = [str(binary), str(src), str(tmp), quant.upper(), str(threads)]
    try:
        res = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=3600,
            env={**os.environ, "OMP_WAIT_POLICY": "passive"},
        )
    except OSError as err:
        raise QuantizeError(f"cannot run {binary}: {err}", remedy="rebuild llama.cpp for this host") from err
    if res.returncode != 0 or not tmp.is_file():
        tail = " / ".join((res.stderr or res.stdout).strip().splitlines()[-3:])
        tmp.unlink(missing_ok=True)
        raise QuantizeError(
            f"llama-quantize {quant} exited {res.returncode}: {tail}",
            remedy=f"run it by hand: {' '.join(argv)}",
        )
    os.replace(tmp, dst)
    return dst


def quantized(
    quantizer: Path | None,
    src: Path,
    dst: Path,
    quant: str,
    *,
    what: str = "",
    progress=None,
    threads: int = 1,
) -> Path:
    """``dst``, quantized from ``src`` by the lab's llama-quantize unless it is already there
    (``what``: "the talker " where a model has more than one file)."""
    if dst.is_file():
        return dst
    if quantizer is None:
        raise NotFound(
            f"quantizing {what}to {quant} needs llama-quantize",
            remedy="edgelab runtime build llama.cpp --target linux-x86_64 --source PATH",
        )
    if progress:
        progress(f"quantizing {what}to {quant.upper()} with {quantizer}")
    return quantize(quantizer, src, dst, quant, threads=threads)


def synth_files(
    name: str,
    params: str | int,
    *,
    quant: str | None = None,
    seed: int = 0,
    vocab: int | None = None,
    out_dir: Path | None = None,
    quantizer: Path | None = None,
    progress=None,
) -> SynthResult:
    """Write (or reuse) the GGUF files; ``quantizer`` is needed only for a quantized model."""
    quant = (quant or "f16").lower()
    if quant not in QUANTS:
        raise EdgelabError(f"unknown quantization {quant!r}", remedy=f"one of: {', '.join(QUANTS)}")
    cfg = config_for(parse_params(params), vocab=vocab)
    folder = Path(out_dir) if out_dir else cache_root() / "models"
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{name}-{cfg.params // 1_000_000 or 1}M-v{cfg.vocab}-s{seed}"
    f16 = folder / f"{stem}-f16.gguf"
    with locked(folder / f".{stem}.lock"):
        if not f16.is_file():
            if progress:
                progress(
                    f"writing {f16.name}: {cfg.params:,} parameters ({cfg.n_layer} layers x {cfg.n_embd})"
                )
            tmp = f16.with_name(f16.name + ".partial")
            write_gguf(tmp, cfg, seed=seed, name=name)
            os.replace(tmp, f16)
        out = f16
        if quant != "f16":
            out = quantized(quantizer, f16, folder / f"{stem}-{quant}.gguf", quant, progress=progress)
    meta = {
        "weights": "random",
        "architecture": ARCH,
        "format": "gguf",
        "params": cfg.params,
        "params_requested": str(params),
        "quant": quant,
        "seed": seed,
        "recipe": {"generator": "edgelab.models.gguf_synth", **describe(cfg), "seed": seed},
    }
    return SynthResult(out, f16, quant, meta)


def synth_model(
    session: Session,
    name: str,
    params: str | int,
    *,
    quant: str | None = None,
    seed: int = 0,
    vocab: int | None = None,
    out_dir: Path | None = None,
    quantizer: Path | None = None,
    progress=None,
) -> Artifact:
    """Make the files and register them as ``kind: model`` (target ``any``: GGUF is portable)."""
    if quant and quant.lower() != "f16" and quantizer is None:
        quantizer = find_product(session, "llama-quantize")
    res = synth_files(
        name,
        params,
        quant=quant,
        seed=seed,
        vocab=vocab,
        out_dir=out_dir,
        quantizer=quantizer,
        progress=progress,
    )
    provenance = {
        "quantization": res.quant,
        "recipe": "edgelab model synth (random weights)",
        "precision": "f16" if res.quant == "f16" else res.quant,
    }
    if quantizer is not None and res.quant != "f16":
        provenance["toolchain"] = f"llama-quantize {quantizer}"
    return add_artifact(
        session,
        name,
        [res.path],
        kind="model",
        target="any",
        component=name,
        provenance=provenance,
        meta=res.meta,
        replace=True,
    )


__all__ = [
    "QUANTS",
    "QuantizeError",
    "SynthResult",
    "find_product",
    "host_target",
    "quantize",
    "synth_files",
    "synth_model",
]
