"""Where llama.cpp really put a model, read from its load log (observed, never assumed).

The lines (vendored llama.cpp 0c1e570; ``-lv 4`` shows the loader's lines on llama-completion,
llama-server logs them with ``-lv 4`` too)::

    llama_model_load_from_file_impl: using device CUDA0 (NVIDIA ...) (0000:01:00.0) - 22000 MiB free
    load_tensors: offloaded 33/33 layers to GPU
    load_tensors:   CPU_Mapped model buffer size =    62.87 MiB
    load_tensors:        CUDA0 model buffer size =  3800.00 MiB
    llama_kv_cache:        CPU KV buffer size =    16.50 MiB
    sched_reserve:        CPU compute buffer size =    18.51 MiB

A buffer named ``CPU``, ``CPU_Mapped``, ``CPU_REPACK`` or ``*_Host`` (pinned host memory) is CPU
memory; ``CUDA0``, ``Vulkan0``, ``ROCm0``, ``Metal``, ``OpenCL``... are a GPU's; ``HTP0``/QNN an
NPU's. A run whose weights all sit in CPU buffers ran on the CPU, whatever the plan said.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

_BUF = re.compile(
    r"(?P<who>load_tensors|llama_kv_cache\w*|sched_reserve|llama_context|llama_new_context_with_model"
    r"|llama_kv_cache_init):\s+(?P<name>\S+)\s+(?P<what>model|KV|compute|output) buffer size\s*=\s*"
    r"(?P<mib>[\d.]+)\s*MiB"
)
_OFFLOAD = re.compile(r"offloaded\s+(?P<n>\d+)/(?P<total>\d+)\s+layers to GPU")
_DEVICE = re.compile(r"using device\s+(?P<name>\S+)\s+\((?P<desc>[^)]*)\)")
_GPU_PREFIXES = (
    "CUDA",
    "ROCm",
    "HIP",
    "Vulkan",
    "Metal",
    "MTL",
    "OpenCL",
    "SYCL",
    "MUSA",
    "CANN",
    "BLAS_GPU",
    "RPC",
)
_NPU_PREFIXES = ("HTP", "QNN", "Hexagon", "NPU")


def buffer_processor(name: str) -> str:
    """cpu | gpu | npu for a ggml buffer-type or device name."""
    if name.startswith("CPU") or name.endswith("_Host") or name.endswith("Host"):
        return "cpu"
    if name.startswith(_NPU_PREFIXES):
        return "npu"
    if name.startswith(_GPU_PREFIXES):
        return "gpu"
    return "cpu" if "cpu" in name.lower() else "gpu"


@dataclass
class Placement:
    devices: list[str] = field(default_factory=list)  # "CUDA0 (NVIDIA ...)" in load order
    layers_offloaded: int | None = None
    layers_total: int | None = None
    model_mib: dict[str, float] = field(default_factory=dict)  # buffer type -> MiB of weights
    kv_mib: dict[str, float] = field(default_factory=dict)
    compute_mib: dict[str, float] = field(default_factory=dict)

    @property
    def observed(self) -> str | None:
        """Where the weights are: cpu, gpu, npu, or ``mixed`` (e.g. cpu+gpu); None when the log
        showed no model buffers (not enough verbosity, or no load yet)."""
        where = {buffer_processor(n) for n, mib in self.model_mib.items() if mib > 0}
        if not where:
            return None
        if len(where) == 1:
            return where.pop()
        return "mixed:" + "+".join(sorted(where))

    def weights_mib(self, processor: str) -> float:
        return sum(mib for n, mib in self.model_mib.items() if buffer_processor(n) == processor)

    def to_dict(self) -> dict:
        return {**asdict(self), "observed": self.observed}


def parse_placement(text: str | Iterable[str]) -> Placement:
    """Every buffer, device and offload line of one load log (a second load overwrites)."""
    p = Placement()
    lines = text.splitlines() if isinstance(text, str) else text
    for line in lines:
        m = _BUF.search(line)
        if m:
            bucket = {"model": p.model_mib, "KV": p.kv_mib, "compute": p.compute_mib}.get(m.group("what"))
            if bucket is not None:
                bucket[m.group("name")] = float(m.group("mib"))
            continue
        m = _OFFLOAD.search(line)
        if m:
            p.layers_offloaded, p.layers_total = int(m.group("n")), int(m.group("total"))
            continue
        m = _DEVICE.search(line)
        if m and ("MiB free" in line or "llama_model_load" in line):
            label = f"{m.group('name')} ({m.group('desc')})"
            if label not in p.devices:
                p.devices.append(label)
    return p


def reconcile(planned: str | None, placement: Placement) -> dict[str, object]:
    """What to report: the observed processor wins; ``fallback`` says the plan asked for an
    accelerator and the log shows the weights elsewhere (e.g. planned gpu, observed cpu)."""
    observed = placement.observed
    fallback = bool(planned and observed and planned != "cpu" and planned not in observed)
    return {"planned": planned, "observed": observed, "fallback": fallback, "evidence": placement.to_dict()}


__all__ = ["Placement", "buffer_processor", "parse_placement", "reconcile"]
