"""The default choice: the best strategy and runtime that can really launch on this device.

A candidate is a (strategy, runtime) pair: the profile's eligible strategies, best first (an S4
endpoint, S1, S3, S5), each with the runtimes that have a launch template for the pipeline under
it, preferred first (the pipeline's own preference, then the runtime of each backend the device
has, then the rest). Every candidate is planned and asked one generic question, through the
caller's ``check``: is there a build for this device's launch target with every artifact the
template binds, runnable on its instruction set? (A virtual device's launch target is the lab
host's, so its plans say "lab host build".) The first real runtime that answers yes is chosen;
when none does, the reference imitation is, and the plan's reason says which real runtimes were
tried and what each lacks. When nothing can launch, the most preferred candidate's plan comes back
with a refusal naming what to build or register, so ``deploy --dry-run`` exits 1.

New targets (cross builds) and new templates (llama-tts, a C++ controller) plug in as data: the
question is asked of whatever runtimes/*.yaml and the artifact registry hold.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from edgelab.deploy.plan import ExecutionPlan
from edgelab.deploy.strategies import build_for, build_plan, choose, eligible_order, s1
from edgelab.deploy.strategies.common import BACKEND_RUNTIME, REFERENCE, PlanContext
from edgelab.errors import Refusal, RefusalCode, RefusedPlan, UnknownName
from edgelab.runtimes.launch import find as find_template
from edgelab.runtimes.launch import runtimes

S1_RUNTIME = "vllm-omni"  # S1 is vLLM-Omni itself

# A pipeline whose best runtime is not its backend's usual one names its order here (runtime ids
# from runtimes/*.yaml, best first); the rest of the catalog follows. Kept as data, one line each.
# Qwen3-TTS: llama.cpp carries it whole (talker, code predictor, code2wav): S3 is edgelab's
# s3-controller over libmtmd, S5 llama-tts; the phone's backends (MNN, ExecuTorch) come after.
PIPELINE_RUNTIMES: dict[str, tuple[str, ...]] = {
    "qwen3-tts-0.6b": ("llama.cpp",),
    "qwen3-tts-1.7b": ("llama.cpp",),
}

# a candidate -> the candidate with its artifacts bound, and why it cannot launch (None: it can)
Check = Callable[[ExecutionPlan], tuple[ExecutionPlan, Refusal | None]]


@dataclass
class Tried:
    """One candidate planned and checked: the plan, and why it cannot launch (None: it can)."""

    strategy: str
    runtime: str
    plan: ExecutionPlan | None
    refusal: Refusal | None

    def line(self) -> str:
        why = self.refusal.detail if self.refusal else "launchable"
        return f"{self.strategy} {self.runtime}: {why}"


def runtime_order(ctx: PlanContext, strategy: str) -> list[str]:
    """Real runtimes with a launch template for this pipeline under ``strategy``, preferred first."""
    catalog = runtimes()
    if strategy == "S1":
        order = [S1_RUNTIME]
    else:
        backends = [b.lower() for b in (ctx.profile.backends or ["cpu"])]
        order = [
            *PIPELINE_RUNTIMES.get(ctx.spec.id, ()),
            *(BACKEND_RUNTIME[b] for b in backends if b in BACKEND_RUNTIME),
            *sorted(catalog),
        ]
    out: list[str] = []
    for rt in order:
        if rt in out or rt == REFERENCE or (strategy != "S1" and rt == S1_RUNTIME) or rt not in catalog:
            continue
        if find_template(catalog[rt], ctx.spec.id, ctx.spec.kind, strategy) is not None:
            out.append(rt)
    return out


def _has_reference(ctx: PlanContext, strategy: str) -> bool:
    ref = runtimes().get(REFERENCE)
    return ref is not None and find_template(ref, ctx.spec.id, ctx.spec.kind, strategy) is not None


def _try(ctx: PlanContext, sid: str, why: str, runtime: str, check: Check) -> Tried:
    try:
        plan = build_for(replace(ctx, runtime=runtime), sid, why)
    except Refusal as r:  # this runtime cannot run under sid, or cannot load the profile's weights
        return Tried(sid, runtime, None, r)
    return Tried(sid, runtime, *check(plan))


def _strategies(ctx: PlanContext, requested: str | None) -> list[tuple[str, str]]:
    """The strategies to try: the one asked for, else every eligible one (at least the fallback)."""
    first = choose(ctx, requested)  # raises when the request (or every strategy) is refused
    if requested:
        return [first]
    return eligible_order(ctx) or [first]  # none eligible: the smallest plan, for admission to refuse


def best_plan(ctx: PlanContext, requested: str | None, check: Check) -> tuple[ExecutionPlan, Refusal | None]:
    """The chosen plan, and a refusal when it cannot launch here (then nothing could).

    ``check`` returns a candidate plan with its artifacts resolved, and why it cannot launch (a
    Refusal) or None. An explicit ``ctx.runtime`` is the only runtime tried.
    """
    if ctx.runtime and ctx.runtime not in runtimes():
        raise UnknownName(
            f"unknown runtime {ctx.runtime!r}",
            remedy=f"choose one of {', '.join(sorted(runtimes()))} (runtimes/*.yaml)",
        )
    if ctx.runtime == S1_RUNTIME and not requested:
        requested = "S1"  # vLLM-Omni runs only as S1
    try:
        strategies = _strategies(ctx, requested)
    except Refusal:
        try:  # S1 asked for by name or runtime is rendered all the same (RefusedPlan), refused with why
            build_plan(ctx, requested)
        except RefusedPlan as shown:
            shown.plan, _ = check(shown.plan)  # its artifacts bound like any candidate's (the refusal stands)
            return shown.plan, shown
        raise
    tried: list[Tried] = []
    if ctx.runtime:
        for sid, why in strategies:
            t = _try(ctx, sid, why, ctx.runtime, check)
            if t.plan is not None and t.refusal is None:
                t.plan.reason += f"; runtime {ctx.runtime} requested"
                return t.plan, None
            tried.append(t)
        return _refused(ctx, tried)
    for sid, why in strategies:  # a real runtime under the best strategy that has one
        for rt in runtime_order(ctx, sid):
            if rt == S1_RUNTIME and not requested and (dead := s1.no_talker_worker(ctx)):
                tried.append(Tried(sid, rt, None, _passed_by(ctx, dead)))
                continue
            t = _try(ctx, sid, why, rt, check)
            if t.plan is not None and t.refusal is None:
                t.plan.reason += "; " + _real_note(t.plan, rt, tried)
                return t.plan, None
            tried.append(t)
    for sid, why in strategies:  # else the reference imitation, said so
        if not _has_reference(ctx, sid):
            continue
        t = _try(ctx, sid, why, REFERENCE, check)
        if t.plan is not None and t.refusal is None:
            t.plan.reason += "; " + _reference_note(tried)
            t.plan.notes += _how_to_real(tried)
            return t.plan, None
        tried.append(t)
    return _refused(ctx, tried)


def _passed_by(ctx: PlanContext, why: str) -> Refusal:
    return Refusal(
        RefusalCode.STRATEGY_REFUSED,
        f"S1 (vLLM-Omni) not chosen automatically: {why}",
        device=ctx.device,
        strategy="S1",
        remedy="`--strategy S1` launches it anyway (to observe the failure)",
    )


def _gaps(tried: list[Tried], most: int = 3) -> str:
    return "; ".join(t.line() for t in tried[:most]) + (
        f"; and {len(tried) - most} more" if len(tried) > most else ""
    )


def _real_note(plan: ExecutionPlan, runtime: str, tried: list[Tried]) -> str:
    target = next((p.target for p in plan.processes if p.target), None)
    ex = plan.execution or {}
    if plan.virtual and (ex.get("mode") == "lab-host-build" or not ex):
        where = "the lab host's build (virtual device)"
    else:
        where = f"its {target} build" + (f" ({ex['label']})" if ex.get("label") else "")
    note = f"runtime {runtime}: {where} and every artifact its template binds are registered"
    return note + (f" (preferred but not launchable: {_gaps(tried)})" if tried else "")


def _reference_note(tried: list[Tried]) -> str:
    if not tried:
        return "runtime reference (imitation): no real runtime has a launch template for this pipeline here"
    return f"runtime reference (imitation): no real runtime can launch here ({_gaps(tried)})"


def _how_to_real(tried: list[Tried]) -> list[str]:
    """What to run so the most preferred real runtime can launch instead of the reference."""
    first = next((t for t in tried if t.plan is not None and t.refusal is not None), None)
    if first is None or first.refusal is None or not first.refusal.remedy:
        return []
    return [f"for {first.runtime} ({first.strategy}) instead of the reference: {first.refusal.remedy}"]


def _refused(ctx: PlanContext, tried: list[Tried]) -> tuple[ExecutionPlan, Refusal]:
    """The most preferred candidate that got as far as a plan, with a refusal naming every gap."""
    if not tried:
        raise Refusal(
            RefusalCode.NO_EXPORTED_GRAPH,
            f"no runtime has a launch template for {ctx.spec.id} (kind {ctx.spec.kind}) under an eligible strategy",
            device=ctx.device,
            remedy="add a launch template to runtimes/*.yaml (`edgelab runtime show RUNTIME`)",
        )
    primary = next((t for t in tried if t.plan is not None), None)
    if primary is None:  # no candidate could even be planned: the first one's own refusal says why
        raise tried[0].refusal or Refusal(
            RefusalCode.NO_EXPORTED_GRAPH,
            "nothing can launch",
            device=ctx.device,
            remedy="see `edgelab runtime ls`",
        )
    assert primary.plan is not None and primary.refusal is not None
    others = [t for t in tried if t is not primary]
    detail = primary.refusal.detail
    if others:
        detail += " | also tried: " + "; ".join(t.line() for t in others[:4])
        detail += f"; and {len(others) - 4} more" if len(others) > 4 else ""
    r = Refusal(
        primary.refusal.code,
        f"nothing can launch {ctx.spec.id} here: {primary.strategy} {primary.runtime}: {detail}",
        device=ctx.device,
        strategy=primary.strategy,
        remedy=primary.refusal.remedy or "see `edgelab runtime ls`",
        numbers={
            "tried": [
                {"strategy": t.strategy, "runtime": t.runtime, "why": t.refusal.detail if t.refusal else None}
                for t in tried
            ]
        },
    )
    return primary.plan, r
