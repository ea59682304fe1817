"""The controller's runtime adapters by name: ``open_engine("mnn" | "onnxruntime", model)``.

Apart from ``engine`` (the interface every adapter implements) so that the adapters import the
interface and this module imports the adapters: no import runs both ways.
"""

from __future__ import annotations

from pathlib import Path

from edgelab.controller.engine import FORMATS, RUNTIMES, Engine
from edgelab.errors import EngineError


def open_engine(
    runtime: str, model: Path | str, *, backend: str = "cpu", threads: int = 1, strict: bool = False
) -> Engine:
    """The adapter for ``runtime`` with ``model`` loaded; ``strict`` refuses a silent CPU fallback."""
    model = Path(model)
    if not model.is_file():
        raise EngineError(
            f"no model file {model}",
            remedy=f"run `edgelab model export action-head --format {FORMATS.get(runtime, runtime)}`",
        )
    if runtime == "mnn":
        from edgelab.controller.rt_mnn import MnnEngine

        return MnnEngine(model, backend=backend, threads=threads, strict=strict)
    if runtime == "onnxruntime":
        from edgelab.controller.rt_onnxruntime import OrtEngine

        return OrtEngine(model, backend=backend, threads=threads, strict=strict)
    raise EngineError(
        f"no controller adapter for runtime {runtime!r}", remedy=f"use one of {', '.join(RUNTIMES)}"
    )
