"""Strategy choice (DESIGN §3) and plan building: S1, S3, S4, S5; S2 is refused with the study's reason.

Automatic choice follows the profile's eligibility: an explicit S4 endpoint first, then S1 where
eligible (Jetson-class CUDA with memory), then S3, then S5, the baseline. ``--strategy`` and
``--runtime`` overrides are honoured when the profile allows them, refused with its reason otherwise.
"""

from __future__ import annotations

from edgelab.deploy.plan import ExecutionPlan
from edgelab.deploy.strategies import s1, s3, s4, s5
from edgelab.deploy.strategies.common import REFERENCE, RUNTIME_FORMATS, PlanContext
from edgelab.deploy.strategies.controller import has_controller
from edgelab.errors import Refusal, RefusalCode, RefusedPlan, UnknownName
from edgelab.runtimes.launch import runtimes

BUILDERS = {"S1": s1.build, "S3": s3.build, "S4": s4.build, "S5": s5.build}
KNOWN = ("S1", "S2", "S3", "S4", "S5")


def _refused(ctx: PlanContext) -> list[dict]:
    return [
        {"strategy": d.strategy, "reason": d.reason, "code": d.code}
        for d in ctx.pipeline_profile.strategies
        if not d.eligible
    ]


def choose(ctx: PlanContext, requested: str | None = None) -> tuple[str, str]:
    """(strategy, why); raises Refusal when the request (or every strategy) is refused."""
    pp = ctx.pipeline_profile
    if requested:
        sid = requested.upper()
        if sid not in KNOWN:
            raise UnknownName(f"unknown strategy {requested!r}", remedy="choose one of S1, S3, S4, S5")
        d = pp.strategy(sid)
        if not d.eligible:
            code = d.code if d.code in (RefusalCode.BUDGET_EXCEEDS_DEVICE,) else RefusalCode.STRATEGY_REFUSED
            raise Refusal(
                code,
                f"{sid} refused: {d.reason}",
                device=ctx.device,
                strategy=sid,
                remedy=_remedy(sid, d.code, pp.eligible),
                numbers={"profile_code": d.code},
            )
        return sid, f"{sid} requested: {d.reason}"
    order = eligible_order(ctx)
    if order:
        return order[0]
    codes = {d.code for d in pp.strategies if not d.eligible}
    why = "; ".join(f"{d.strategy}: {d.reason}" for d in pp.strategies)
    if RefusalCode.BUDGET_EXCEEDS_DEVICE in codes:
        # Let admission name the pool and the numbers: plan at the smallest format tried.
        return "S5" if pp.strategy(
            "S5"
        ).code == RefusalCode.BUDGET_EXCEEDS_DEVICE else "S3", "no strategy fits: " + why
    raise Refusal(
        RefusalCode.NO_RUNNABLE_DEVICE,
        f"no strategy can run {ctx.spec.id}: {why}",
        device=ctx.device,
        remedy="probe the device again (`edgelab probe`) or pick a device whose class has a runtime target",
    )


def eligible_order(ctx: PlanContext) -> list[tuple[str, str]]:
    """Every eligible strategy, best first, with why: an S4 endpoint, then S1, S3, S5 (the floor)."""
    order = (["S4"] if ctx.endpoint else []) + ["S1", "S3", "S5"]
    if ctx.runtime and ctx.runtime not in ("vllm-omni", REFERENCE):
        order.remove("S1")  # S1 is vLLM-Omni itself: another runtime starts at S3
    others = "; ".join(f"{r['strategy']} refused ({r['reason']})" for r in _refused(ctx))
    return [
        (sid, f"{sid}: {d.reason}" + (f". {others}" if others else ""))
        for sid in order
        if (d := ctx.pipeline_profile.strategy(sid)).eligible
    ]


def _remedy(sid: str, code: str | None, eligible: list[str]) -> str:
    alt = f"eligible here: {', '.join(eligible)}" if eligible else "no strategy is eligible on this device"
    if sid == "S4" and code == "no_endpoint":
        return f"give --endpoint ws://SERVER:PORT for S4, or drop --strategy ({alt})"
    if sid == "S2":
        return f"S2 is a documented refusal; use another strategy ({alt})"
    return f"drop --strategy to choose automatically ({alt})"


def build_plan(ctx: PlanContext, requested: str | None = None) -> ExecutionPlan:
    """Choose the strategy and build its plan; a refused override or runtime raises Refusal
    (RefusedPlan, with the plan rendered all the same, for S1 asked for by name or runtime)."""
    if ctx.runtime == "vllm-omni" and not requested:
        requested = "S1"  # vLLM-Omni runs only as S1
    try:
        sid, why = choose(ctx, requested)
    except Refusal as r:
        if s1.wanted(ctx, requested) and r.code != "no_runnable_device":
            plan = s1.refused_plan(ctx, r)
            broken = s1.launch_refusal(plan)  # a broken venv: its remedy says how to mend it
            if broken is not None and "does not import" in broken.detail:
                r.remedy = broken.remedy
            raise RefusedPlan(r, plan) from None
        raise
    return build_for(ctx, sid, why)


def build_for(ctx: PlanContext, sid: str, why: str) -> ExecutionPlan:
    """The plan of strategy ``sid`` on ``ctx.runtime`` (None: the strategy's own pick); Refusal when
    that runtime cannot run under it or load the profile's weight format."""
    known = runtimes()
    if ctx.runtime and ctx.runtime not in known:
        raise UnknownName(
            f"unknown runtime {ctx.runtime!r}",
            remedy=f"choose one of {', '.join(sorted(known))} (runtimes/*.yaml)",
        )
    if ctx.runtime == "vllm-omni" and sid != "S1":
        raise Refusal(
            RefusalCode.STRATEGY_REFUSED,
            f"runtime vllm-omni runs only under S1, not {sid}",
            device=ctx.device,
            strategy=sid,
            remedy="drop --runtime, or use --strategy S1 on a Jetson-class device",
        )
    if sid == "S1" and ctx.runtime not in (None, "vllm-omni", REFERENCE):
        raise Refusal(
            RefusalCode.STRATEGY_REFUSED,
            f"S1 runs vLLM-Omni itself, not {ctx.runtime}",
            device=ctx.device,
            strategy=sid,
            remedy="use --strategy S3 or S5 for another runtime",
        )
    plan = BUILDERS[sid](ctx, why)
    fit = ctx.pipeline_profile.fit
    quant = fit.quantization or (fit.budget.quantization if fit.budget else None)
    if has_controller(plan.runtime, ctx.spec.kind):
        quant = (
            "fp32"  # edgelab's controller loads its exported fp32 graphs (random weights), not a checkpoint
        )
        plan.notes.append("S3 controller over exported fp32 stages (random weights): edgelab model export")
    if quant and plan.runtime in RUNTIME_FORMATS and quant not in RUNTIME_FORMATS[plan.runtime]:
        raise Refusal(
            RefusalCode.WEIGHT_FORMAT_UNSUPPORTED,
            f"{plan.runtime} cannot load {quant} weights (it loads {', '.join(RUNTIME_FORMATS[plan.runtime])})",
            device=ctx.device,
            strategy=sid,
            remedy="choose a runtime that loads this format (--runtime)",
        )
    plan.refused = _refused(ctx)
    return plan


__all__ = ["BUILDERS", "PlanContext", "RefusedPlan", "build_for", "build_plan", "choose", "eligible_order"]
