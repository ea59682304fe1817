"""Export a random-weight stage to ONNX or MNN into the lab's model cache, and register it as an artifact.

The recipe (stage, seed, format, exporter and converter versions) is the artifact's provenance;
the same recipe gives the same bytes, so an export already in the cache is reused after its
SHA-256 is checked. Artifacts are kind ``model`` with ``weights: random`` and ``role`` = the stage.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from edgelab.artifacts.hashing import sha256_path
from edgelab.errors import ConfigError

FORMATS = ("onnx", "mnn")


@dataclass(frozen=True)
class Exported:
    stage: str
    format: str
    path: Path
    sha256: str
    size: int
    recipe: dict[str, Any]
    artifact: str  # the registry name

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["path"] = str(self.path)
        return d


def cache_dir() -> Path:
    """``$EDGELAB_HOME/models`` (default ``~/.edgelab/models``)."""
    home = os.environ.get("EDGELAB_HOME")
    return (Path(home) if home else Path.home() / ".edgelab") / "models"


def recipe(stage: str, fmt: str, seed: int) -> dict[str, Any]:
    """What makes the file: every input that changes its bytes."""
    import importlib.metadata as md

    from edgelab.models.stages import IR_VERSION, OPSET, STAGES

    spec = STAGES[stage]
    r: dict[str, Any] = {
        "stage": stage,
        "pipeline": spec.pipeline,
        "pipeline_stage": spec.stage,
        "seed": seed,
        "format": fmt,
        "weights": "random",
        "builder": "edgelab.models.stages",
        "params": dict(spec.params),
        "opset": OPSET,
        "ir_version": IR_VERSION,
        "onnx": md.version("onnx"),
    }
    if fmt == "mnn":
        r["converter"] = f"MNN {md.version('MNN')} _tools.mnnconvert -f ONNX (edgelab.models.mnn_convert)"
    return r


def artifact_name(stage: str, fmt: str, seed: int) -> str:
    return f"{stage}.random-s{seed}.{fmt}"


def export(stage: str, fmt: str, *, seed: int = 0, out_dir: Path | None = None) -> Exported:
    """Write (or reuse) the stage's file in ``fmt``; MNN is converted from the ONNX export."""
    from edgelab.models.stages import STAGES

    if stage not in STAGES:
        raise ConfigError(f"no exportable stage {stage!r}", remedy=f"use one of {', '.join(STAGES)}")
    if fmt not in FORMATS:
        raise ConfigError(f"no export format {fmt!r}", remedy=f"use one of {', '.join(FORMATS)}")
    rec = recipe(stage, fmt, seed)
    key = hashlib.sha256(json.dumps(rec, sort_keys=True).encode()).hexdigest()[:16]
    folder = (out_dir or cache_dir()) / key
    path = folder / f"{stage}.{fmt}"
    stamp = folder / f"{stage}.{fmt}.sha256"
    if path.is_file() and stamp.is_file() and sha256_path(path) == stamp.read_text().strip():
        saved = folder / "recipe.json"
        rec = json.loads(saved.read_text()) if saved.is_file() else rec
        return _result(stage, fmt, seed, path, stamp.read_text().strip(), rec)
    folder.mkdir(parents=True, exist_ok=True)
    if fmt == "onnx":
        import onnx

        from edgelab.models.stages import build

        tmp = path.with_name(path.name + ".part")
        onnx.save(build(stage, seed), str(tmp))
        os.replace(tmp, path)
    else:
        from edgelab.models.mnn_convert import convert

        src = export(stage, "onnx", seed=seed, out_dir=out_dir)
        convert(src.path, path)
        rec["source_onnx_sha256"] = src.sha256
    digest = sha256_path(path)
    (folder / "recipe.json").write_text(json.dumps(rec, indent=1, sort_keys=True))
    stamp.write_text(digest + "\n")
    return _result(stage, fmt, seed, path, digest, rec)


def _result(stage: str, fmt: str, seed: int, path: Path, digest: str, rec: dict[str, Any]) -> Exported:
    return Exported(stage, fmt, path, digest, path.stat().st_size, rec, artifact_name(stage, fmt, seed))


def register(session, ex: Exported, pipeline: str | None = None) -> Any:
    """Register (or replace) the export as a ``model`` artifact for any target (launch templates bind it).

    ``pipeline``: another pipeline with the same stage interface (pi0's head is 50 x 32, 10 steps too)
    gets its own artifact name over the same file."""
    from edgelab.artifacts.registry import add_artifact

    prov = {
        "recipe": json.dumps(ex.recipe, sort_keys=True),
        "precision": "fp32",
        "exporter_version": ex.recipe.get("converter") or f"onnx {ex.recipe['onnx']}",
    }
    meta = {
        "weights": "random",
        "stage": ex.recipe["pipeline_stage"],
        "role": ex.recipe["pipeline_stage"],
        "pipeline": pipeline or ex.recipe["pipeline"],
        "format": ex.format,
        "seed": ex.recipe["seed"],
        "sha256": ex.sha256,
    }
    name = ex.artifact if pipeline in (None, ex.recipe["pipeline"]) else f"{pipeline}.{ex.artifact}"
    return add_artifact(
        session,
        name,
        [ex.path],
        kind="model",
        target="any",
        component=ex.stage,
        provenance=prov,
        meta=meta,
        replace=True,
    )
