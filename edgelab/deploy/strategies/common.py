"""What every strategy shares: the planning context, runtime choice, memory request, reference runtime.

The reference runtime is what a virtual device can really run: edgelab's own workload with random
weights on the CPU (``python -m edgelab.reference``); it never claims an accelerator.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any

from edgelab.catalog.pipelines import PipelineSpec
from edgelab.deploy.artifact_need import ArtifactNeed
from edgelab.deploy.plan import ExecutionPlan, ProcessSpec, StagePlan
from edgelab.deploy.strategies.controller import has_controller
from edgelab.profile import DeployProfile, PipelineProfile
from edgelab.runtimes.emulation import execution
from edgelab.runtimes.launch import find as find_template
from edgelab.runtimes.launch import host_target, pick_target, render, runtimes
from edgelab.runtimes.targets import cpu_targets

REFERENCE = "reference"
REFERENCE_PLACEMENT = "cpu (reference, random weights)"

# Runtimes a strategy can run a stage on, and the weight formats each loads.
RUNTIME_FORMATS: dict[str, tuple[str, ...]] = {
    "vllm-omni": ("bf16", "fp16"),
    "llama.cpp": ("bf16", "fp16", "q8_0", "q4"),
    "mnn": ("fp32", "fp16", "q8_0", "q4"),
    "onnxruntime": ("fp32", "fp16", "q8_0"),  # edgelab's S3 controller loads exported ONNX graphs
    "executorch": ("fp16", "q8_0", "q4"),
    "ncnn": ("fp16", "q8_0", "fp32"),
    REFERENCE: ("bf16", "fp16", "q8_0", "q4", "fp32"),
}
# Which runtime realises which backend, in preference order.
BACKEND_RUNTIME = {
    "cuda": "llama.cpp",
    "qnn": "executorch",
    "opencl": "mnn",
    "vulkan": "llama.cpp",
    "directml": "llama.cpp",
    "cpu": "llama.cpp",
}
PLACEMENT = {
    "cuda": "gpu",
    "vulkan": "gpu",
    "opencl": "gpu",
    "directml": "gpu",
    "qnn": "npu",
    "xdna": "npu",
    "cpu": "cpu",
}


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
    values: dict[str, Any] | None = None  # template values that override what the strategy chose (bench)
    purpose: str = "deploy"  # deploy | bench: a template's bench variant is what a bench runs
    threads: int | None = None  # operator override of the profile's thread count
    software: dict[str, str] = field(default_factory=dict)  # the probe's software facts (vLLM-Omni venv)
    lab_host_build: bool = False  # a virtual device runs the lab host's build, not its own (labelled)
    target: str | None = None  # operator override: launch this build target (checked against the facts)

    def __post_init__(self) -> None:
        # A virtual device's commands are processes on the lab host, so they use this interpreter;
        # a real device runs the reference zipapp with its own python3.
        if self.python is None:
            self.python = sys.executable if self.virtual else "python3"


def runtime_and_backend(ctx: PlanContext) -> tuple[str, str]:
    """The runtime for a local strategy: the override, the reference on a virtual device, else by backend."""
    backends = [b.lower() for b in (ctx.profile.backends or ["cpu"])]
    if ctx.runtime and ctx.virtual:
        return ctx.runtime, "cpu"  # the lab host's build runs on the lab host's CPU
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
    return REFERENCE_PLACEMENT if runtime == REFERENCE else PLACEMENT.get(backend.lower(), backend)


def memory_request(
    ctx: PlanContext, stages: list[str] | None = None
) -> tuple[dict[str, int], dict[str, Any]]:
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
    kv_tok = sum(
        s.model.kv_bytes_per_token() for s in spec.stages if s.model and (stages is None or s.name in stages)
    )
    kv = kv_tok * spec.min_context_tokens * ctx.profile.defaults.max_seqs
    detail = {
        "pool": pool.name,
        "quantization": quant,
        "weights": weights,
        "activations": act,
        "kv": kv,
        "kv_bytes_per_token": kv_tok,
        "tokens": spec.min_context_tokens,
        "max_seqs": ctx.profile.defaults.max_seqs,
        "headroom": ctx.profile.defaults.headroom_bytes,
        "fits_profile": fit.fits,
    }
    return {pool.name: weights + act + kv}, detail


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def runs_build(tpl) -> bool:
    """True when the template starts a program of the runtime's build (``{bin}/llama-server``),
    not an interpreter the device already has (``{python} -m edgelab.controller``)."""
    first = tpl.argv[0] if tpl.argv else ""
    return isinstance(first, str) and first.startswith("{bin}")


def _windows(ctx: PlanContext) -> bool:
    return any(t.startswith("windows-") for t in ctx.profile.runtime_targets or [])


def launch_targets(ctx: PlanContext, native: bool = True, runtime: str | None = None) -> list[str]:
    """Build targets a launch may use, most specific first.

    A virtual device runs its own CPU target's build (``linux-aarch64`` on an Orin persona, under
    qemu; ``windows-x64`` on a Windows persona, under wine), the lab host's with
    ``--lab-host-build``; a program run by the lab's interpreter (the reference runtime, edgelab's
    controller) uses the lab host's target. ``--target`` names one target outright.
    """
    if ctx.target:
        return [ctx.target]
    if ctx.virtual:
        if not native and _windows(ctx) and runtime != REFERENCE:
            # edgelab's controller with POSIX paths is no Windows program: the device's own targets
            return list(ctx.profile.runtime_targets or [])
        if ctx.lab_host_build or not native:
            return [host_target()]
        return cpu_targets(ctx.profile.runtime_targets or [])
    return list(ctx.profile.runtime_targets or [])


def threads(ctx: PlanContext) -> int:
    """The profile's thread count; on a virtual device capped at the lab host's cores (it runs there)."""
    if ctx.threads:
        return max(1, int(ctx.threads))
    n = ctx.profile.threads or 1
    if ctx.virtual:
        n = min(n, os.cpu_count() or 1)
    return max(1, n)


def template_process(
    ctx: PlanContext,
    name: str,
    runtime: str,
    strategy: str,
    backend: str = "cpu",
    values: dict[str, Any] | None = None,
    stage: str | None = None,
    show_unavailable: bool = False,
) -> tuple[ProcessSpec, list[ArtifactNeed]]:
    """The process ``runtime``'s template for this pipeline and strategy describes, and the artifacts it needs.

    A missing runtime, template or target is not raised here (planning has no side effects): the
    process carries ``unavailable`` and deploy refuses it before anything is pushed.
    ``show_unavailable``: a template written for other targets is still rendered (for its first
    target), so the plan shows the command it would run there (S1 shows ``vllm serve`` everywhere).
    """
    spec = runtimes().get(runtime)
    stage = stage or next((s.name for s in ctx.spec.stages if s.model), None)
    proc = ProcessSpec(name=name, argv=[], runtime=runtime)
    if spec is None:
        proc.unavailable = f"unknown runtime {runtime!r} (known: {', '.join(sorted(runtimes()))})"
        return proc, []
    tpl = find_template(spec, ctx.spec.id, ctx.spec.kind, strategy)
    if tpl is None:
        have = sorted(f"{k} {s}" for k, v in spec.launch.items() for s in v)
        proc.unavailable = (
            f"{runtime} has no {strategy} launch template for {ctx.spec.id} (kind {ctx.spec.kind}); "
            f"its templates: {', '.join(have) or 'none'}"
        )
        return proc, []
    if ctx.purpose == "bench" and tpl.bench is not None:
        tpl = tpl.bench
    targets = launch_targets(ctx, runs_build(tpl), runtime)
    target = pick_target(tpl, targets)
    proc.template = tpl.ref
    if target is None:
        proc.unavailable = (
            f"{tpl.ref} is written for {', '.join(tpl.targets)}, not for this device's "
            f"target{'s' if len(targets) != 1 else ''} {', '.join(targets) or '(none probed)'}"
        )
        if _windows(ctx) and not runs_build(tpl) and runtime != REFERENCE:
            proc.unavailable += (
                f"; {runtime} runs under edgelab's Python controller, which has no Windows-side runner "
                "(its zipapp and model paths are POSIX ones): run it on this machine's WSL side or on a "
                "Linux or Android device"
            )
        proc.target = targets[0] if targets else None
        if not show_unavailable:
            return proc, []
    n_threads = threads(ctx)
    if ctx.virtual and not ctx.threads and runs_build(tpl) and not ctx.lab_host_build and target:
        if execution(target).emulated:
            n_threads = 1  # qemu: ggml's workers spin at every barrier; one thread decodes ~2.5x faster
    base: dict[str, Any] = {
        "python": ctx.python,
        "run": ctx.run_id,
        "device": ctx.device,
        "threads": n_threads,
        "backend": backend,
        "gpu_layers": 999 if PLACEMENT.get(backend.lower()) == "gpu" else None,
    }
    if ctx.virtual and tpl.port is not None:
        base["port"] = free_port()  # a virtual device's loopback is the lab host's, shared by every device
    base.update(values or {})
    base.update(ctx.values or {})
    r = render(tpl, base)
    proc.argv, proc.env, proc.library_path = r.argv, r.env, r.library_path
    proc.adapter, proc.placement, proc.ready = tpl.adapter, tpl.placement, r.ready
    if target is None:  # rendered to be shown only: no artifacts are asked for
        return proc, []
    proc.target = target
    proc.port, proc.serves, proc.workdir, proc.values = r.port, r.serves, tpl.workdir, r.values
    if r.ready.get("kind") == "log":
        proc.ready_pattern = str(r.ready["pattern"])
    # the lab's own interpreter has edgelab (and, for edgelab's S3 controller, the vla extra's runtimes)
    optional_build = (runtime == REFERENCE or has_controller(runtime, ctx.spec.kind)) and ctx.virtual
    needs = [
        ArtifactNeed(
            role=f"runtime.{runtime}",
            process=name,
            kind="runtime",
            runtime=runtime,
            target=target,
            optional=optional_build,
        )
    ]
    for ph, need in tpl.artifacts.items():
        if need.kind == "runtime":
            needs.append(
                ArtifactNeed(
                    role=f"runtime.{runtime}:{need.ext or ph}",
                    process=name,
                    placeholder=ph,
                    kind="runtime",
                    runtime=runtime,
                    target=target,
                    ext=need.ext,
                    optional=optional_build,
                )
            )
        else:
            needs.append(
                ArtifactNeed(
                    layout=need.layout if need.layout != "file" else None,
                    fallback=(
                        str(base[need.fallback])
                        if need.fallback and base.get(need.fallback) is not None
                        else None
                    ),
                    role=f"{need.role or stage or ph}.{need.kind}",
                    stage=stage,
                    process=name,
                    placeholder=ph,
                    kind=need.kind,
                    ext=need.ext,
                    want_role=need.role,
                    pipeline=ctx.spec.id,
                    pipeline_kind=ctx.spec.kind,
                    target=target,
                    optional=False,
                )
            )
    return proc, needs


def artifact_roles(spec: PipelineSpec, stage: str, runtime: str, quant: str | None) -> list[str]:
    """Artifact roles one stage needs on the device (none for the reference: random weights)."""
    if runtime in (REFERENCE, "server"):
        return []
    st = next(s for s in spec.stages if s.name == stage)
    if st.model is None:
        return [f"{stage}.tokenizer"] if st.role == "tokenizer" else []
    fmt = {"llama.cpp": "gguf", "mnn": "mnn", "executorch": "pte", "vllm-omni": "hf"}.get(runtime, runtime)
    return [f"{stage}.{quant or 'fp16'}.{fmt}"]


def stage_plans(
    ctx: PlanContext,
    runtime: str,
    backend: str,
    *,
    process: str,
    only: list[str] | None = None,
    remote_runtime: str | None = None,
) -> list[StagePlan]:
    """One StagePlan per pipeline stage; stages outside ``only`` run on the server (S4)."""
    quant = ctx.pipeline_profile.fit.quantization or (
        ctx.pipeline_profile.fit.budget.quantization if ctx.pipeline_profile.fit.budget else None
    )
    out = []
    for s in ctx.spec.stages:
        if only is not None and s.name not in only:
            out.append(StagePlan(s.name, s.role, remote_runtime or "vllm-omni", "remote", "server", [], None))
            continue
        out.append(
            StagePlan(
                s.name,
                s.role,
                runtime,
                backend,
                placement_of(runtime, backend),
                artifact_roles(ctx.spec, s.name, runtime, quant),
                process,
            )
        )
    return out


def ready_timeout(ctx: PlanContext, floor: float = 30.0) -> float:
    """Start-up timeout from the profile's load-time estimate (weights / read bandwidth), x3 + 20 s."""
    load = ctx.pipeline_profile.fit.load_time_s or 0.0
    return max(floor, round(load * 3 + 20, 1))


def base_plan(
    ctx: PlanContext,
    strategy: str,
    runtime: str,
    reason: str,
    stages: list[StagePlan],
    processes: list[ProcessSpec],
    memory_stages: list[str] | None = None,
    needs: list[ArtifactNeed] | None = None,
    **extra: Any,
) -> ExecutionPlan:
    """The plan around rendered processes: artifacts are the templates' needs, plus the stages' roles
    for a process that has no template (so a refusal names what is missing either way)."""
    memory, detail = memory_request(ctx, memory_stages)
    templated = {p.name for p in processes if p.unavailable is None}
    artifacts = [
        ArtifactNeed(role=role, stage=st.name)
        for st in stages
        for role in st.artifacts
        if st.process not in templated
    ]
    artifacts += list(needs or [])
    for st in stages:
        if st.process in templated:
            st.artifacts = [a.role for a in artifacts if a.process == st.process and a.stage == st.name]
    plan = ExecutionPlan(
        pipeline=ctx.spec.id,
        device=ctx.device,
        strategy=strategy,
        runtime=runtime,
        reason=reason,
        stages=stages,
        processes=processes,
        memory=memory,
        memory_detail=detail,
        expected_outputs=list(ctx.spec.metrics),
        artifacts=artifacts,
        remote_dir=ctx.remote_dir,
        ready_timeout_s=ready_timeout(ctx),
        virtual=ctx.virtual,
        **extra,
    )
    built = [p for p in processes if p.runtime not in (None, REFERENCE) and p.target and p.argv]
    native = [p for p in built if (p.argv[0] or "").startswith("{bin}")]
    if ctx.virtual and native:
        ex = execution(native[0].target or host_target(), lab_host_build=ctx.lab_host_build)
        plan.execution = ex.to_dict()
        if ex.emulated:  # qemu translates every instruction; wine starts its services first
            plan.ready_timeout_s = max(plan.ready_timeout_s * 5, 150.0)
        own = ", ".join(ctx.profile.runtime_targets or []) or "unknown"
        plan.notes.append(
            f"virtual device: lab host build ({host_target()}); the device's own targets are {own}"
            if ex.mode == "lab-host-build"
            else f"virtual device: {ex.label()}"
            + ("; figures are emulated: never a device's, never a matrix cell's" if ex.emulated else "")
        )
        if ex.missing:
            for p in native:
                p.unavailable = p.unavailable or (
                    f"this virtual device cannot run a {ex.target} build: {ex.missing}"
                )
    elif ctx.virtual and built:
        plan.notes.append(
            f"virtual device: {', '.join(sorted({p.runtime or '' for p in built}))} runs under the lab's "
            f"interpreter ({host_target()})"
        )
    return plan


def one_process_plan(
    ctx: PlanContext,
    strategy: str,
    reason: str,
    process: str,
    values: dict[str, Any] | None = None,
    *,
    stage: str | None = None,
    only: list[str] | None = None,
    **extra: Any,
) -> ExecutionPlan:
    """A local strategy's plan: one process rendered from the runtime's ``strategy`` template over
    the stages it runs. S3, S4 and S5 differ only in the process's name, the values they add to the
    profile's (``values``), the stage a template need is for, and the stages run here (``only``:
    those, and the memory reserved for them; None: every stage)."""
    runtime, backend = runtime_and_backend(ctx)
    vals = {**strategy_values(ctx, strategy), **(values or {})}
    proc, needs = template_process(ctx, process, runtime, strategy, backend, vals, stage=stage)
    stages = stage_plans(ctx, runtime, backend, process=process, only=only)
    if only is not None:
        extra["memory_stages"] = only
    return base_plan(ctx, strategy, runtime, reason, stages, [proc], needs=needs, **extra)


def strategy_values(ctx: PlanContext, strategy: str) -> dict[str, Any]:
    """Template values a local strategy knows from the profile: the TTS chunk schedule, and the text a
    deployment speaks (the medium band's) with its frame budget (random weights never end speech)."""
    out: dict[str, Any] = {}
    if ctx.spec.kind == "tts":
        from edgelab.reference.tts import BAND_TEXTS, frames_for_text

        ramp = (ctx.pipeline_profile.fit.chunk_schedule or {}).get("ramp_frames")
        out["schedule"] = ",".join(str(f) for f in ramp) if ramp else "ramp"
        out["text"] = BAND_TEXTS["medium"]
        out["frames"] = frames_for_text(out["text"])
    return out
