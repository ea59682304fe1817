"""MNN adapter: an Interpreter session on the requested forward type, its real backend read back.

MNN quietly uses the CPU when the requested backend is not in the build ("Can't Find type=3
backend, use 0 instead" on stdout, nothing else). The adapter asks the session for its backend
(``getSessionInfo(BACKENDS)``) and records that. Only ``import MNN`` is used, never ``MNN.tools``
(its telemetry wrapper; see edgelab.models.mnn_convert).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgelab.controller.engine import KIND_OF_BACKEND, Placement, loaded_library
from edgelab.errors import EngineError

BACKENDS = {
    "cpu": "CPU",
    "cuda": "CUDA",
    "opencl": "OPENCL",
    "vulkan": "VULKAN",
    "metal": "METAL",
    "opengl": "OPENGL",
    "nnapi": "NN",
    "qnn": "NN",
}
# MNNForwardType (include/MNN/MNNForwardType.h)
FORWARD_TYPES = {
    0: ("cpu", "MNN_FORWARD_CPU"),
    1: ("gpu", "MNN_FORWARD_METAL"),
    2: ("gpu", "MNN_FORWARD_CUDA"),
    3: ("gpu", "MNN_FORWARD_OPENCL"),
    5: ("npu", "MNN_FORWARD_NN"),
    6: ("gpu", "MNN_FORWARD_OPENGL"),
    7: ("gpu", "MNN_FORWARD_VULKAN"),
    13: ("cpu", "MNN_FORWARD_CPU_EXTENSION (CPU with AVX2/AVX512 or ARMv8.2 kernels)"),
}
SESSION_INFO_BACKENDS = 2  # Interpreter::SessionInfoCode::BACKENDS


class MnnEngine:
    runtime = "mnn"

    def __init__(self, model: Path, *, backend: str = "cpu", threads: int = 1, strict: bool = False):
        backend = backend.lower()
        try:
            import MNN
        except ImportError as e:
            raise EngineError(f"MNN is not installed: {e}") from e
        if backend not in BACKENDS:
            raise EngineError(
                f"MNN has no forward type for backend {backend!r}", remedy=f"use one of {', '.join(BACKENDS)}"
            )
        self._mnn = MNN
        self.model = model
        self.interp = MNN.Interpreter(str(model))
        self.session = self.interp.createSession(
            {"backend": BACKENDS[backend], "numThread": threads, "precision": "high"}
        )
        code = int(self.interp.getSessionInfo(self.session, SESSION_INFO_BACKENDS))
        kind, name = FORWARD_TYPES.get(code, ("unknown", f"forward type {code}"))
        want_kind = KIND_OF_BACKEND.get(backend, backend)
        self.placement = Placement(
            runtime="mnn",
            runtime_version=MNN.version(),
            requested=backend,
            observed=kind,
            detail=f"session backend {code}: {name}",
            fallback=kind != want_kind,
        )
        self.library = loaded_library("_mnncengine", "MNN", str(MNN.version()))
        if strict and self.placement.fallback:
            raise EngineError(f"MNN ran {model.name} on {name}, not {backend} (strict placement)")
        self._inputs = self.interp.getSessionInputAll(self.session)
        self.inputs = {k: tuple(v.getShape()) for k, v in self._inputs.items()}
        self._shapes = dict(self.inputs)
        outs = self.interp.getSessionOutputAll(self.session)
        self._out = sorted(outs)[0]

    def _halide(self, a: np.ndarray):
        m = self._mnn
        return {np.dtype(np.float32): m.Halide_Type_Float, np.dtype(np.int32): m.Halide_Type_Int}[a.dtype]

    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        m = self._mnn
        resized = False
        for name, a in feeds.items():
            if self._shapes.get(name) != a.shape:  # dynamic dims (codec frames): resize, then re-plan
                self.interp.resizeTensor(self._inputs[name], a.shape)
                self._shapes[name] = a.shape
                resized = True
        if resized:
            self.interp.resizeSession(self.session)
        for name, a in feeds.items():
            a = np.ascontiguousarray(a)
            self._inputs[name].copyFrom(m.Tensor(a.shape, self._halide(a), a, m.Tensor_DimensionType_Caffe))
        self.interp.runSession(self.session)
        out = self.interp.getSessionOutput(self.session, self._out)
        shape = tuple(out.getShape())
        host = m.Tensor(shape, m.Halide_Type_Float, np.zeros(shape, np.float32), m.Tensor_DimensionType_Caffe)
        out.copyToHostTensor(host)
        return np.array(host.getNumpyData(), dtype=np.float32).reshape(shape)

    def close(self) -> None:
        self.session = None
        self.interp = None
