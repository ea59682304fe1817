"""ONNX Runtime adapter: an InferenceSession on the requested execution provider, placement observed.

ONNX Runtime drops a requested provider that is not in this build with only a Python warning
and runs everything on the CPU. The adapter records the providers the session really has and,
from one profiled run at load, which provider ran each node. ``strict`` sets
``session.disable_cpu_ep_fallback`` so a graph that would land on the CPU fails instead.
"""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from collections import Counter
from pathlib import Path

import numpy as np

from edgelab.controller.engine import KIND_OF_BACKEND, Placement, loaded_library
from edgelab.errors import EngineError

PROVIDERS = {
    "cpu": "CPUExecutionProvider",
    "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider",
    "qnn": "QNNExecutionProvider",
    "directml": "DmlExecutionProvider",
    "openvino": "OpenVINOExecutionProvider",
    "coreml": "CoreMLExecutionProvider",
    "xnnpack": "XnnpackExecutionProvider",
    "vitisai": "VitisAIExecutionProvider",
    "nnapi": "NnapiExecutionProvider",
}
_KIND = {v: KIND_OF_BACKEND[k] for k, v in PROVIDERS.items()}


class OrtEngine:
    runtime = "onnxruntime"

    def __init__(self, model: Path, *, backend: str = "cpu", threads: int = 1, strict: bool = False):
        backend = backend.lower()
        try:
            import onnxruntime as ort
        except ImportError as e:
            raise EngineError(f"onnxruntime is not installed: {e}") from e
        self._ort = ort
        want = PROVIDERS.get(backend)
        if want is None:
            raise EngineError(
                f"ONNX Runtime has no provider for backend {backend!r}",
                remedy=f"use one of {', '.join(PROVIDERS)}",
            )
        providers = [want] if want == PROVIDERS["cpu"] or strict else [want, PROVIDERS["cpu"]]
        self.model = model
        self.requested = want
        self._threads = threads
        self._strict = strict
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                self.session = ort.InferenceSession(str(model), self._options(), providers=providers)
            except Exception as e:  # ORT raises its own Fail/InvalidGraph types
                raise EngineError(f"ONNX Runtime refused {model.name} on {want}: {e}") from e
        self._warnings = [str(w.message) for w in caught]
        self.inputs = {i.name: tuple(i.shape) for i in self.session.get_inputs()}
        self._out = self.session.get_outputs()[0].name
        got = self.session.get_providers()
        observed_kind = _KIND.get(got[0], "cpu")
        self.placement = Placement(
            runtime="onnxruntime",
            runtime_version=ort.__version__,
            requested=backend,
            observed=observed_kind,
            detail="session providers: "
            + ", ".join(got)
            + ("; " + " | ".join(self._warnings) if self._warnings else ""),
            fallback=got[0] != want,
            nodes={},
        )
        self.library = loaded_library(
            "onnxruntime.capi.onnxruntime_pybind11_state", "ONNX Runtime", str(ort.__version__)
        )
        if strict and got[0] != want:
            raise EngineError(f"ONNX Runtime ran {model.name} on {got[0]}, not {want} (strict placement)")

    def _options(self, profile_prefix: str | None = None):
        so = self._ort.SessionOptions()
        so.intra_op_num_threads = self._threads
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        if self._strict and self.requested != PROVIDERS["cpu"]:  # asking for the CPU cannot fall back to it
            so.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
        if profile_prefix:
            so.enable_profiling = True
            so.profile_file_prefix = profile_prefix
        return so

    def profile_nodes(self, feeds: dict[str, np.ndarray]) -> dict[str, int]:
        """Run once in a profiled twin session; count the nodes each provider ran (from ORT's trace)."""
        with tempfile.TemporaryDirectory(prefix="edgelab-ortprof-") as d:
            twin = self._ort.InferenceSession(
                str(self.model), self._options(os.path.join(d, "p")), providers=self.session.get_providers()
            )
            twin.run(None, feeds)
            trace = json.loads(Path(twin.end_profiling()).read_text())
        counts = Counter(
            e["args"].get("provider", "?")
            for e in trace
            if e.get("cat") == "Node" and isinstance(e.get("args"), dict)
        )
        self.placement.nodes = dict(counts)
        if counts and any(p != self.session.get_providers()[0] for p in counts):
            self.placement.fallback = True  # some nodes left the requested provider
        return self.placement.nodes

    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        return self.session.run([self._out], feeds)[0]

    def close(self) -> None:
        self.session = None
