"""S1 direct port: vLLM-Omni itself on the device (``vllm serve MODEL --omni --deploy-config ...``).

The command is vllm-omni's S1 template (runtimes/vllm-omni.yaml, what vLLM-Omni documents for the
pipeline), run from the device venv ``edgelab runtime install vllm-omni`` made (the probe reads
its stamp: ``software.vllm*``). For Qwen3-TTS the deploy config is the edge profile written out
(edgelab.runtimes.vllm_omni): per stage the fraction of the budget pool the plan reserves (what
vLLM is told as ``gpu_memory_utilization``: GPU memory on CUDA, RAM on its CPU backend), sequences,
context, dtype and the chunk schedule with the edge ramp; it is written into the run directory and
its SHA-256 kept in the plan.

The plan is rendered for every device, launchable or not, so ``--dry-run`` always shows the exact
command, environment and fractions; what makes it unlaunchable (no venv, an import that fails,
a device class S1 does not serve, no checkpoint on an offline lab) is the process's
``unavailable`` and :func:`launch_refusal` turns it into the refusal that names it. The study
measured 95-355 s cold starts: the start-up timeouts come from the profile's load estimate
(``--ready-timeout`` overrides it).
"""

from __future__ import annotations

from edgelab.deploy.plan import ExecutionPlan, ProcessSpec
from edgelab.deploy.strategies.common import (
    REFERENCE,
    PlanContext,
    base_plan,
    memory_request,
    stage_plans,
    template_process,
    threads,
)
from edgelab.errors import Refusal, RefusalCode
from edgelab.probe.parsers.vllm import importable
from edgelab.runtimes import vllm_omni
from edgelab.runtimes.launch import runtimes

RUNTIME = "vllm-omni"
CODE2WAV = "code2wav"


def model_id(ctx: PlanContext) -> str:
    """The Hugging Face id from the spec's first source (``https://huggingface.co/ORG/NAME``)."""
    for src in ctx.spec.sources:
        if "huggingface.co/" in src:
            return src.split("huggingface.co/", 1)[1].strip("/")
    return ctx.spec.id


def installed(ctx: PlanContext) -> bool:
    return bool(ctx.software.get("vllm_omni"))


def venv_path(ctx: PlanContext) -> str:
    """The probed venv, else where ``edgelab runtime install`` puts it (shown, not launchable)."""
    if ctx.software.get("vllm_venv"):
        return ctx.software["vllm_venv"]
    spec = runtimes().get(RUNTIME)
    rel = spec.venv.path if spec is not None and spec.venv is not None else ".edgelab/venvs/vllm-omni"
    return f"~/{rel}"


def backend(ctx: PlanContext) -> str:
    """CUDA where the device's torch is a CUDA build (or, not installed yet, its class has CUDA);
    the CPU on a virtual device (it runs on the lab host) and with a CPU torch."""
    if ctx.virtual or ctx.software.get("torch_build") == "cpu":
        return "cpu"
    return "cuda" if "cuda" in [b.lower() for b in ctx.profile.backends or []] else "cpu"


def _pool(ctx: PlanContext, be: str):
    """The pool vLLM takes its fraction of: the budget pool on CUDA (VRAM, or unified RAM on a
    Jetson), host memory on its CPU backend (a WSL quota before the RAM)."""
    if be == "cuda":
        return ctx.profile.budget_pool
    pools = {p.name: p for p in ctx.profile.pools}
    return next((pools[n] for n in ("wsl_quota", "ram") if n in pools), ctx.profile.budget_pool)


def _fractions(ctx: PlanContext, be: str) -> tuple[vllm_omni.StageMemory, dict[str, int]] | None:
    """Per stage group (talker side, code2wav) the pool fraction that holds its weights, activations
    and KV, and the bytes the plan reserves for them."""
    pool = _pool(ctx, be)
    if pool is None or not pool.total_bytes:
        return None
    names = [s.name for s in ctx.spec.stages]
    talker = [n for n in names if n != CODE2WAV]
    want_t = sum(memory_request(ctx, talker)[0].values())
    want_c = sum(memory_request(ctx, [CODE2WAV])[0].values()) if CODE2WAV in names else 0
    ft = vllm_omni.fraction(want_t, pool.total_bytes)
    fc = vllm_omni.fraction(want_c, pool.total_bytes) if want_c else 0.01
    return vllm_omni.StageMemory(ft, fc), {pool.name: int((ft + fc) * pool.total_bytes)}


def _deploy_config(ctx: PlanContext, be: str, memory: vllm_omni.StageMemory, max_len: int) -> str:
    sched = ctx.pipeline_profile.fit.chunk_schedule or {}
    server = sched.get("server") or {}
    return vllm_omni.Qwen3TTSDeploy(
        backend=be,
        dtype=ctx.profile.dtype,
        max_seqs=ctx.profile.defaults.max_seqs,
        max_model_len=max_len,
        memory=memory,
        first_frames=int(server.get("first_frames", 1)),
        steady_frames=int(server.get("steady_frames", 25)),
        left_context_frames=int(server.get("left_context_frames", 72)),
        ramp=tuple(int(f) for f in sched.get("ramp_frames") or ()),
    ).text()


def _unavailable(ctx: PlanContext) -> str | None:
    """What the device's facts say against launching vLLM-Omni there (None: nothing)."""
    d = ctx.pipeline_profile.strategy("S1")
    sw = ctx.software
    if installed(ctx) and not importable(sw):
        mod, err = next(
            (m, sw.get(k))
            for m, k in (("vllm", "vllm_import"), ("vllm_omni", "vllm_omni_import"))
            if sw.get(k) != "ok"
        )
        return (
            f"{mod} does not import on {ctx.device}: {err} ({sw.get('vllm_dist') or 'vllm'} {sw.get('vllm')}, "
            f"vllm-omni {sw.get('vllm_omni')}, torch {sw.get('torch')} in {sw.get('vllm_venv')})"
        )
    if not installed(ctx):
        why = "" if d.eligible else f"; and S1 is refused here: {d.reason}"
        return (
            f"vLLM-Omni is not installed on {ctx.device}: the probe found no venv stamp "
            f"(~/.edgelab/venvs/*/.edgelab-runtime.json){why}"
        )
    if not d.eligible:
        return f"S1 refused: {d.reason}"
    return None


def build(ctx: PlanContext, reason: str, *, shown: bool = False) -> ExecutionPlan:
    """The S1 plan; ``shown``: vLLM-Omni's even where the reference would stand in (a refused S1)."""
    if ctx.runtime == REFERENCE or (ctx.virtual and not ctx.runtime and not installed(ctx) and not shown):
        return _reference(ctx, reason)
    be = backend(ctx)
    fit = ctx.pipeline_profile.fit
    b = fit.budget
    max_len = min(max(ctx.spec.min_context_tokens, (b.max_tokens_per_seq or 0) if b else 0), 4096)
    sized = _fractions(ctx, be)
    memory = sized[0] if sized else vllm_omni.StageMemory(0.3, 0.3)  # vLLM-Omni's own defaults
    ready = max(30.0, fit.load_time_s * 3 + 20 if fit.load_time_s else 30.0)
    values: dict = {
        "model_id": model_id(ctx),
        "venv": venv_path(ctx),
        "max_seqs": ctx.profile.defaults.max_seqs,
        "max_model_len": max_len,
        "dtype": vllm_omni.DTYPES.get(ctx.profile.dtype, "bfloat16"),
        "gpu_mem_util": f"{memory.talker + memory.code2wav:.2f}",
        "deploy_config": vllm_omni.FILENAME,
        "stage_init_timeout": int(max(300, ready)),
        "init_timeout": int(max(600, 2 * ready)),
        "cpu_bind": f"0-{threads(ctx) - 1}" if be == "cpu" else None,
        "hf_offline": "1" if ctx.virtual else None,
    }
    proc, needs = template_process(ctx, "server", RUNTIME, "S1", be, values, show_unavailable=True)
    if proc.unavailable is None:
        proc.unavailable = _unavailable(ctx)
    # the server runs from the device's venv (its stamp names the wheels), not from pushed files;
    # the checkpoint is the template's one artifact
    needs = [n for n in needs if n.kind != "runtime"]
    stages = stage_plans(ctx, RUNTIME, be, process="server")
    for st in stages:
        st.artifacts = []
    plan = base_plan(ctx, "S1", RUNTIME, reason, stages, [proc], needs=needs)
    plan.ready_timeout_s = max(plan.ready_timeout_s, float(values["stage_init_timeout"]))
    if ctx.spec.kind == "tts":
        text = _deploy_config(ctx, be, memory, max_len)
        proc.files = {vllm_omni.FILENAME: text}
        plan.memory_detail["deploy_config"] = {
            "file": vllm_omni.FILENAME,
            "sha256": vllm_omni.sha256(text),
            "vllm_omni": vllm_omni.VERSION,
        }
    if sized:
        plan.memory = sized[1]
        plan.memory_detail["gpu_memory_utilization"] = {"talker": memory.talker, "code2wav": memory.code2wav}
        pool = next(iter(sized[1]))
        what = "of GPU memory" if be == "cuda" else "of RAM (vLLM's CPU backend reads the flag so)"
        plan.notes.append(
            f"vLLM-Omni stages get gpu_memory_utilization {memory.talker:.2f} (talker) + "
            f"{memory.code2wav:.2f} (code2wav) {what}: the {sized[1][pool]} bytes this plan reserves in {pool}"
        )
    plan.endpoints = [proc.serves] if proc.serves else []
    plan.runtime_info = _runtime_info(ctx, plan)
    _notes(ctx, plan, proc, be)
    return plan


def _runtime_info(ctx: PlanContext, plan: ExecutionPlan) -> dict:
    """vLLM-Omni on the device as its venv stamp says (versions, wheel SHA-256s, torch build), and the
    deploy config's SHA-256: what the run's provenance keeps of the runtime it ran."""
    sw = ctx.software
    wheels = dict(w.split("=", 1) for w in (sw.get("vllm_wheels") or "").split(", ") if "=" in w)
    info = {
        "runtime": RUNTIME,
        "installed": installed(ctx),
        "vllm_omni": sw.get("vllm_omni"),
        "vllm": sw.get("vllm"),
        "vllm_dist": sw.get("vllm_dist"),
        "torch": sw.get("torch"),
        "torch_build": sw.get("torch_build"),
        "venv": sw.get("vllm_venv"),
        "checked_at": sw.get("vllm_checked_at"),
        "fixups": sw.get("vllm_fixups"),
        "wheels_sha256": wheels,
        "deploy_config_sha256": (plan.memory_detail.get("deploy_config") or {}).get("sha256"),
    }
    return {k: v for k, v in info.items() if v not in (None, {}, "")}


def _notes(ctx: PlanContext, plan: ExecutionPlan, proc: ProcessSpec, be: str) -> None:
    sw = ctx.software
    if installed(ctx):
        plan.notes.append(
            f"vLLM-Omni on the device: vllm-omni {sw.get('vllm_omni')}, {sw.get('vllm_dist') or 'vllm'} "
            f"{sw.get('vllm')}, torch {sw.get('torch')} ({sw.get('torch_build') or 'build unknown'}), "
            f"checked {sw.get('vllm_checked_at') or '?'}"
        )
        worker = sw.get("vllm_omni_ar_worker") or ""
        if worker.startswith("none"):
            plan.notes.append(
                f"vLLM-Omni resolves {sw.get('vllm_omni_platform')} here, which has no worker for the "
                f"talker stage ({worker}): expect the start-up to fail at stage init"
            )
        if sw.get("vllm_fixups"):
            plan.notes.append(f"CPU fix-ups in the venv: {sw['vllm_fixups']} (see the stamp)")
    else:
        plan.notes.append(
            f"install it: `edgelab runtime install vllm-omni --device {ctx.device}`, then `edgelab probe {ctx.device}`"
        )
    if be == "cpu":
        plan.notes.append("S1 on vLLM's CPU backend: every figure is a CPU figure, never a GPU one")
    sched = ctx.pipeline_profile.fit.chunk_schedule or {}
    if sched.get("server"):
        plan.notes.append(f"server chunk schedule {sched['server']}; edge ramp {sched.get('ramp_frames')}")


def _reference(ctx: PlanContext, reason: str) -> ExecutionPlan:
    """The reference imitation of S1 (a virtual device without vLLM-Omni, or ``--runtime reference``)."""
    proc, needs = template_process(ctx, "server", REFERENCE, "S1", "cpu", {"schedule": "server"})
    plan = base_plan(
        ctx,
        "S1",
        REFERENCE,
        reason,
        stage_plans(ctx, REFERENCE, "cpu", process="server"),
        [proc],
        needs=needs,
    )
    plan.endpoints = [proc.serves] if proc.serves else []
    if ctx.runtime != REFERENCE:
        plan.notes.append(
            f"vLLM-Omni is not installed on {ctx.device}: this S1 runs edgelab's reference imitation; "
            f"`--runtime vllm-omni --dry-run` shows the vllm serve command, "
            f"`edgelab runtime install vllm-omni --device {ctx.device}` installs it"
        )
    sched = ctx.pipeline_profile.fit.chunk_schedule or {}
    if sched.get("server"):
        plan.notes.append(f"server chunk schedule {sched['server']}; edge ramp {sched.get('ramp_frames')}")
    return plan


def no_talker_worker(ctx: PlanContext) -> str | None:
    """Why an automatic choice should pass vLLM-Omni by: its platform has no worker for the talker.

    The probe records what vLLM-Omni resolves on the device (``vllm_omni_ar_worker``); "none: ..."
    means the server would die at stage init (vLLM-Omni 0.30 on CPU). Asked for by name, S1 still
    launches, so the failure itself can be observed; chosen by default, it never is.
    """
    worker = ctx.software.get("vllm_omni_ar_worker") or ""
    if not installed(ctx) or not worker.startswith("none"):
        return None
    return (
        f"vLLM-Omni resolves {ctx.software.get('vllm_omni_platform') or 'a platform'} on {ctx.device}, "
        f"which has no worker for the talker stage ({worker})"
    )


def wanted(ctx: PlanContext, requested: str | None) -> bool:
    """S1 asked for by name or by runtime: its plan is shown even where it is refused."""
    return (requested or "").upper() == "S1" or ctx.runtime == RUNTIME


def refused_plan(ctx: PlanContext, refusal: Refusal) -> ExecutionPlan:
    """The S1 plan of a device S1 refuses: rendered all the same, its process unlaunchable with why."""
    return build(ctx, f"S1 requested: {refusal.detail}", shown=True)


def launch_refusal(plan: ExecutionPlan) -> Refusal | None:
    """A vLLM-Omni plan whose server cannot start here, refused with the fact that says so."""
    if plan.runtime != RUNTIME:
        return None
    proc = next((p for p in plan.processes if p.runtime == RUNTIME), None)
    if proc is None:
        return None
    why = proc.unavailable
    if why is None and plan.virtual:
        model = next((a for a in plan.artifacts if a.placeholder == "model"), None)
        if model is not None and not model.present:
            why = (
                f"no Hugging Face checkpoint of {plan.pipeline} is registered and the virtual lab has no "
                "hub access"
            )
    if why is None:
        return None
    remedy = (
        f"`edgelab runtime install vllm-omni --device {plan.device}`, then `edgelab probe {plan.device}`"
        if "not installed" in why
        else "`edgelab model synth-hf qwen3-tts` (random weights)"
        if "checkpoint" in why
        else "see the venv's stamp (`edgelab facts DEVICE`); reinstall with `edgelab runtime install vllm-omni`"
        if "does not import" in why
        else "drop --strategy/--runtime to choose automatically"
    )
    return Refusal(
        RefusalCode.STRATEGY_REFUSED,
        f"S1 (vLLM-Omni) cannot start here: {why}",
        device=plan.device,
        remedy=remedy,
        strategy="S1",
    )
