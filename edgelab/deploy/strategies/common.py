"""What every strategy shares: the planning context, runtime choice, memory request, reference runtime.

The reference runtime is what a virtual device can really run: edgelab's own workload with random
weights on the CPU (``python -m edgelab.reference``); it never claims an accelerator.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from edgelab.catalog.pipelines import PipelineSpec
from edgelab.deploy.plan import ExecutionPlan, ProcessSpec, StagePlan
from edgelab.profile import DeployProfile, PipelineProfile

REFERENCE = "reference"
REFERENCE_PLACEMENT = "cpu (reference, random weights)"

# Runtimes a strategy can run a stage on, and the weight formats each loads.
RUNTIME_FORMATS: dict[str, tuple[str, ...]] = {
    "vllm-omni": ("bf16", "fp16"),
    "llama.cpp": ("bf16", "fp16", "q8_0", "q4"),
    "mnn": ("fp32", "fp16", "q8_0", "q4"),
    "executorch": ("fp16", "q8_0", "q4"),
    "onnxruntime": ("fp32", "fp16", "q8_0"),  # edgelab's S3 controller loads exported ONNX graphs
    REFERENCE: ("bf16", "fp16", "q8_0", "q4", "fp32"),
}
# Which runtime realises which backend, in preference order.
BACKEND_RUNTIME = {"cuda": "llama.cpp", "qnn": "executorch", "opencl": "mnn", "vulkan": "llama.cpp",
                   "directml": "llama.cpp", "cpu": "llama.cpp"}
PLACEMENT = {"cuda": "gpu", "vulkan": "gpu", "opencl": "gpu", "directml": "gpu", "qnn": "npu", "xdna": "npu",
             "cpu": "cpu"}


@dataclass
class PlanContext:
    """Everything a strategy may look at; strategies never open a connection."""

    device: str
    spec: PipelineSpec
    profile: DeployProfile
    pipeline_profile: PipelineProfile
    run_id: str
    remote_dir: str
    virtual: bool = False
    runtime: str | None = None  # operator override
    endpoint: str | None = None  # S4 server URL
    python: str | None = None  # the reference runtime's interpreter; see __post_init__

    def __post_init__(self) -> None:
        # A virtual device's commands are processes on the lab host, so they use this interpreter;
        # a real device runs the reference zipapp with its own python3.
        if self.python is None:
            self.python = sys.executable if self.virtual else "python3"


def runtime_and_backend(ctx: PlanContext) -> tuple[str, str]:
    """The runtime for a local strategy: the override, the reference on a virtual device, else by backend."""
    backends = ctx.profile.backends or ["cpu"]
    if ctx.runtime:
        for b in backends:
            if BACKEND_RUNTIME.get(b) == ctx.runtime:
                return ctx.runtime, b
        return ctx.runtime, "cpu" if ctx.runtime == REFERENCE else backends[0]
    if ctx.virtual:
        return REFERENCE, "cpu"
    b = backends[0]
    return BACKEND_RUNTIME.get(b, "llama.cpp"), b


def placement_of(runtime: str, backend: str) -> str:
    return REFERENCE_PLACEMENT if runtime == REFERENCE else PLACEMENT.get(backend, backend)


def memory_request(ctx: PlanContext, stages: list[str] | None = None) -> tuple[dict[str, int], dict[str, Any]]:
    """Bytes to reserve in the budget pool: weights + activations + KV for max_seqs x min context.

    Headroom is not reserved: admission takes it off the pool's capacity instead.
    """
    fit = ctx.pipeline_profile.fit
    b = fit.budget
    pool = ctx.profile.budget_pool
    if b is None or pool is None:
        return {}, {"note": "no memory pool known"}
    spec = ctx.spec
    quant = fit.quantization or b.quantization
    weights = spec.weight_bytes(quant, stages)
    act = max(int(0.15 * weights), 512 * 1024**2)
    kv_tok = sum(s.model.kv_bytes_per_token() for s in spec.stages
                 if s.model and (stages is None or s.name in stages))
    kv = kv_tok * spec.min_context_tokens * ctx.profile.defaults.max_seqs
    detail = {"pool": pool.name, "quantization": quant, "weights": weights, "activations": act, "kv": kv,
              "kv_bytes_per_token": kv_tok, "tokens": spec.min_context_tokens,
              "max_seqs": ctx.profile.defaults.max_seqs, "headroom": ctx.profile.defaults.headroom_bytes,
              "fits_profile": fit.fits}
    return {pool.name: weights + act + kv}, detail


REFERENCE_KINDS = ("tts", "vla")  # the workloads ``python -m edgelab.reference`` has


def reference_process(ctx: PlanContext, name: str = "reference", schedule: str | None = None) -> ProcessSpec:
    """The reference workload, emitting edgelab events as JSON lines on stdout until stopped.

    A deployment serves until ``edgelab stop``: the workload is paced at real time with a request
    count no session reaches.
    """
    kind = ctx.spec.kind
    argv = [ctx.python, "-m", "edgelab.reference", kind if kind in REFERENCE_KINDS else f"unsupported:{kind}"]
    if kind == "tts":
        ramp = (ctx.pipeline_profile.fit.chunk_schedule or {}).get("ramp_frames")
        sched = schedule or (",".join(str(f) for f in ramp) if ramp else "ramp")
        argv += ["--schedule", sched, "--frames-per-s", "12.5", "--requests", "100000", "--band", "medium"]
    elif kind == "vla":
        argv += ["--steps", "100000000"]
    argv += ["--run", ctx.run_id, "--device", ctx.device]
    return ProcessSpec(name=name, argv=argv, ready_pattern=r'"kind":\s*"run\.start"')


def artifact_roles(spec: PipelineSpec, stage: str, runtime: str, quant: str | None) -> list[str]:
    """Artifact roles one stage needs on the device (none for the reference: random weights)."""
    if runtime in (REFERENCE, "server"):
        return []
    st = next(s for s in spec.stages if s.name == stage)
    if st.model is None:
        return [f"{stage}.tokenizer"] if st.role == "tokenizer" else []
    fmt = {"llama.cpp": "gguf", "mnn": "mnn", "executorch": "pte", "vllm-omni": "hf"}.get(runtime, runtime)
    return [f"{stage}.{quant or 'fp16'}.{fmt}"]


def stage_plans(ctx: PlanContext, runtime: str, backend: str, *, process: str,
                only: list[str] | None = None, remote_runtime: str | None = None) -> list[StagePlan]:
    """One StagePlan per pipeline stage; stages outside ``only`` run on the server (S4)."""
    quant = ctx.pipeline_profile.fit.quantization or (ctx.pipeline_profile.fit.budget.quantization
                                                      if ctx.pipeline_profile.fit.budget else None)
    out = []
    for s in ctx.spec.stages:
        if only is not None and s.name not in only:
            out.append(StagePlan(s.name, s.role, remote_runtime or "vllm-omni", "remote", "server", [], None))
            continue
        out.append(StagePlan(s.name, s.role, runtime, backend, placement_of(runtime, backend),
                             artifact_roles(ctx.spec, s.name, runtime, quant), process))
    return out


def ready_timeout(ctx: PlanContext, floor: float = 30.0) -> float:
    """Start-up timeout from the profile's load-time estimate (weights / read bandwidth), x3 + 20 s."""
    load = ctx.pipeline_profile.fit.load_time_s or 0.0
    return max(floor, round(load * 3 + 20, 1))


def base_plan(ctx: PlanContext, strategy: str, runtime: str, reason: str, stages: list[StagePlan],
              processes: list[ProcessSpec], memory_stages: list[str] | None = None, **extra: Any) -> ExecutionPlan:
    memory, detail = memory_request(ctx, memory_stages)
    artifacts = [{"role": role, "stage": st.name} for st in stages for role in st.artifacts]
    return ExecutionPlan(pipeline=ctx.spec.id, device=ctx.device, strategy=strategy, runtime=runtime, reason=reason,
                         stages=stages, processes=processes, memory=memory, memory_detail=detail,
                         expected_outputs=list(ctx.spec.metrics), artifacts=artifacts, remote_dir=ctx.remote_dir,
                         ready_timeout_s=ready_timeout(ctx), **extra)
