"""Deploy planning: a request -> the plan, its artifacts and its admission, before anything is touched.

Everything here only reads the database (and the catalog): what ``edgelab deploy --dry-run``
shows, and the checks that refuse a plan before a reservation is made (an artifact missing, a
process with no launch template, a build for another OS, architecture, ABI or instruction set
than the machine that would start it: ``edgelab.deploy.targetcheck``).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass, field, fields
from typing import Any

from sqlalchemy import Engine

from edgelab.catalog.devices import load_devices
from edgelab.catalog.pipelines import load_pipelines, resolve_pipeline_id
from edgelab.credentials import SecretURL, split_url
from edgelab.deploy import admission, sizing, targetcheck
from edgelab.deploy import artifacts as plan_artifacts
from edgelab.deploy.artifact_need import ArtifactNeed, ResolvedArtifact
from edgelab.deploy.choice import best_plan
from edgelab.deploy.plan import ExecutionPlan
from edgelab.deploy.strategies import PlanContext, s1
from edgelab.errors import Refusal, RefusalCode
from edgelab.probe.facts import Facts
from edgelab.profile import DeployProfile, derive_profile
from edgelab.store.db import session_scope
from edgelab.store.devices import get_device
from edgelab.store.runs import new_run_id
from edgelab.store.snapshots import latest_snapshot
from edgelab.transport.host import Host, host_named


@dataclass
class LaunchTarget:
    """What to launch where: the fields a deploy and a bench request share (positional: device,
    pipeline, strategy, runtime; the rest by keyword)."""

    device: str
    pipeline: str
    strategy: str | None = None
    runtime: str | None = None
    _: KW_ONLY
    model: str | None = None  # a model artifact by name (default: the newest registered for the pipeline)
    values: dict[str, Any] = field(default_factory=dict)  # launch template values that override the plan's
    threads: int | None = None  # override the profile's thread count
    lab_host_build: bool = False  # a virtual device runs the lab host's build instead of its own (labelled)
    target: str | None = None  # launch this build target (default: the device's, most specific first)

    def target_fields(self) -> dict[str, Any]:
        """This request's shared fields, to build another kind of request for the same target."""
        return {f.name: getattr(self, f.name) for f in fields(LaunchTarget)}


@dataclass
class DeployRequest(LaunchTarget):
    endpoint: SecretURL | None = None  # S4's server; a str is split on arrival: str() is masked
    _: KW_ONLY
    purpose: str = "deploy"  # bench: a template's bench variant (e.g. llama-bench for S5)
    ready_timeout: float | None = None  # start-up limit in seconds (default: the profile's load estimate)

    def __post_init__(self) -> None:
        self.endpoint = split_url(self.endpoint)


@dataclass
class Planned:
    """A plan and its admission, before anything is reserved or touched."""

    request: DeployRequest
    plan: ExecutionPlan
    profile: DeployProfile
    admission: list[dict[str, Any]]
    facts_hash: str | None
    virtual: bool
    refusal: Refusal | None = None
    unlaunchable: Refusal | None = None  # why nothing can launch here (also when admission refused first)
    probe: dict[str, Any] | None = (
        None  # the snapshot planned from (facts_hash, device_class, facts, virtual)
    )

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.request.device,
            "pipeline": self.plan.pipeline,
            "virtual": self.virtual,
            "plan": self.plan.to_dict(),
            "admission": self.admission,
            "refusal": self.refusal.to_dict() if self.refusal else None,
        }


def resolve_pipeline(name: str) -> str:
    """A pipeline id or an alias from the catalog (``qwen3-tts``) -> the id; unknown is a ConfigError."""
    return resolve_pipeline_id(name, load_pipelines())  # CatalogError is a ConfigError


def plan(engine: Engine, req: DeployRequest, *, run_id: str | None = None) -> Planned:
    """Plan and check admission against the ledger; no write, no connection (what --dry-run shows)."""
    pipeline_id = resolve_pipeline(req.pipeline)
    spec = load_pipelines()[pipeline_id]
    with session_scope(engine, write=False) as s:
        device = get_device(s, req.device)
        snap = latest_snapshot(s, req.device, device=device)
        facts = Facts.from_dict(snap.facts or {})
        profile = derive_profile(facts, load_devices(), spec, endpoint_configured=bool(req.endpoint))
        run = run_id or new_run_id()
        host = host_named(device.shell)  # its run root; the real one is asked at connect
        ctx = PlanContext(
            device=device.name,
            spec=spec,
            profile=profile,
            pipeline_profile=profile.pipeline(spec.id),
            run_id=run,
            remote_dir=f"{host.planned_run_root}{host.sep}{run}",
            virtual=bool(device.virtual),
            runtime=req.runtime,
            endpoint=req.endpoint.shown if req.endpoint else None,  # the plan sees no secret
            values=dict(req.values),
            threads=req.threads,
            purpose=req.purpose,
            software=dict(facts.software),
            lab_host_build=req.lab_host_build,
            target=req.target,
        )

        def launchable(unbound: ExecutionPlan) -> tuple[ExecutionPlan, Refusal | None]:
            """The candidate with its artifacts bound; why it cannot launch here, or None (the chooser's question)."""
            candidate = plan_artifacts.resolve(
                s, unbound, list(profile.runtime_targets or []), model=req.model
            )
            sizing.resize(candidate, ctx)  # admission sizes the model it binds, not the catalog's
            mismatch = targetcheck.check(candidate, facts, lab_host_build=req.lab_host_build)
            if mismatch is not None:  # a build for another machine than the one that would start it
                return candidate, mismatch
            refused = s1.launch_refusal(candidate)  # vLLM-Omni's own: its venv, its checkpoint
            if refused is not None:
                return candidate, refused
            try:
                check_artifacts(candidate)
            except Refusal as r:
                return candidate, r
            return candidate, None

        chosen, unlaunchable = best_plan(ctx, req.strategy, launchable)
        the_plan = admission.spread(chosen, profile)
        if req.ready_timeout:
            the_plan.ready_timeout_s = float(req.ready_timeout)
        planned = Planned(req, the_plan, profile, [], snap.facts_hash, bool(device.virtual))
        planned.probe = {  # what the run's provenance says of the device: the probe it was planned from
            "facts_hash": snap.facts_hash,
            "device_class": snap.device_class,
            "facts": dict(snap.facts or {}),
            "virtual": snap.virtual,
        }
        try:
            planned.admission = [line.to_dict() for line in admission.check(s, device, profile, the_plan)]
        except Refusal as r:  # capacity first: a plan that cannot fit is rejected whatever it lacks
            planned.refusal = r
            planned.admission = [r.numbers] if r.numbers else []
        planned.unlaunchable = unlaunchable
        if unlaunchable is not None and unlaunchable.code == "build_target_mismatch":
            planned.refusal = unlaunchable  # the wrong machine first: nothing else matters until it is right
        elif planned.refusal is None:
            planned.refusal = unlaunchable
        if planned.refusal is None:
            planned.refusal = _secret_refusal(req, the_plan, host)
    return planned


def _secret_refusal(req: DeployRequest, the_plan: ExecutionPlan, host: type[Host]) -> Refusal | None:
    """A device process gets an endpoint's secret by environment, over its launch command's stdin;
    a host with no such way (Windows: its script travels on a command line) refuses, not leaks."""
    if req.endpoint is None or not req.endpoint.has_secret or host.secret_env:
        return None
    if not any(p.values.get("server") == req.endpoint.shown for p in the_plan.processes):
        return None
    return Refusal(
        RefusalCode.STRATEGY_REFUSED,
        f"the endpoint {req.endpoint.shown} holds credentials, which edgelab passes to a device "
        "process only by environment on Linux and Android",
        device=req.device,
        remedy="let the server accept this device without a password (or behind an SSH tunnel), "
        "or run the device stage on a Linux or Android device",
        strategy=the_plan.strategy,
    )


def check_artifacts(p: ExecutionPlan) -> None:
    """Every process launchable here and every artifact registered; refused before anything is reserved.

    A process with no template for this pipeline, strategy or target says so first; the artifacts
    it would need are named beside it, so one refusal lists everything that is missing.
    """
    missing = plan_artifacts.missing_entries(p)
    what = ", ".join(_describe(e) for e in missing)
    remedies = list(dict.fromkeys(plan_artifacts.remedy_for(e) for e in missing))
    blocked = [f"{proc.name}: {proc.unavailable}" for proc in p.processes if proc.unavailable]
    if blocked:
        detail = "; ".join(blocked) + (
            f"; it also needs artifacts that are not registered: {what}" if missing else ""
        )
        raise Refusal(
            RefusalCode.NO_EXPORTED_GRAPH,
            detail,
            device=p.device,
            strategy=p.strategy,
            remedy="; ".join(
                [
                    "choose a runtime and strategy with a launch template for this pipeline "
                    "(`edgelab runtime show RUNTIME`), or add one to runtimes/*.yaml",
                    *remedies,
                ]
            ),
        )
    if missing:
        own_build = p.virtual and p.execution.get("mode") in ("emulated", "native")
        lab_host = (
            "; or --lab-host-build to run the lab host's build on this virtual device (labelled so)"
            if own_build and any(e.kind == "runtime" for e in missing)
            else ""
        )
        raise Refusal(
            RefusalCode.NO_EXPORTED_GRAPH,
            f"{p.runtime} needs artifacts that are not registered: {what}",
            device=p.device,
            strategy=p.strategy,
            remedy="; ".join(remedies)
            + lab_host
            + ("" if p.virtual else "; or deploy on a virtual device with --runtime reference"),
        )


def _describe(e: ArtifactNeed) -> str:
    if e.kind == "runtime":
        progs = f" with {', '.join(e.programs)}" if isinstance(e, ResolvedArtifact) and e.programs else ""
        return f"a {e.runtime} build for {e.target}{progs}" + (f" with a {e.ext} file" if e.ext else "")
    if e.kind in ("model", "weights"):
        return f"a {e.ext or ''} model for {e.pipeline} ({e.role})"
    return str(e.role)
