"""What the controller asks of a runtime: run one graph on named arrays, and say where it ran.

Placement is read back from the runtime itself (ONNX Runtime's session providers and its
per-node profile; MNN's session backend type), never taken from what was requested: a stage
planned for a GPU or NPU that the runtime put on the CPU is recorded as ``cpu`` with
``fallback: true``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import numpy as np

RUNTIMES = ("mnn", "onnxruntime")
FORMATS = {"mnn": "mnn", "onnxruntime": "onnx"}


@dataclass
class Placement:
    """Where a stage ran, as the runtime reports it."""

    runtime: str
    runtime_version: str
    requested: str  # the backend the plan asked for: cpu, cuda, opencl, qnn, ...
    observed: str  # cpu | gpu | npu, from the runtime
    detail: str  # the runtime's own words: provider list, forward type
    fallback: bool  # requested an accelerator, got the CPU (or something else)
    nodes: dict[str, int] = field(default_factory=dict)  # per provider/backend node counts, when known

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def loaded_library(module: str, name: str, version: str) -> dict[str, Any]:
    """The runtime's native library as this process loaded it: its file and that file's SHA-256
    (the wheel's version string says what was meant; the bytes say what ran)."""
    import hashlib
    import sys

    path = getattr(sys.modules.get(module), "__file__", None)
    sha = None
    if path:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        sha = h.hexdigest()
    return {"name": name, "version": version, "path": path, "sha256": sha or "unknown", "source": "as loaded"}


KIND_OF_BACKEND = {
    "cpu": "cpu",
    "xnnpack": "cpu",
    "cuda": "gpu",
    "tensorrt": "gpu",
    "opencl": "gpu",
    "vulkan": "gpu",
    "metal": "gpu",
    "directml": "gpu",
    "opengl": "gpu",
    "qnn": "npu",
    "nnapi": "npu",
    "coreml": "npu",
    "xdna": "npu",
    "vitisai": "npu",
    "openvino": "cpu",
}


class Engine(Protocol):
    runtime: str
    placement: Placement
    library: dict[str, Any]  # loaded_library(): the native library that runs the graph
    inputs: dict[str, tuple[int | str, ...]]

    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        """One forward pass; returns the (first) output as a numpy array the caller owns."""
        ...

    def close(self) -> None: ...
