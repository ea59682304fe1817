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
    inputs: dict[str, tuple[int | str, ...]]

    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        """One forward pass; returns the (first) output as a numpy array the caller owns."""
        ...

    def close(self) -> None: ...
