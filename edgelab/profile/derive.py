"""Facts + catalog (+ pipeline) -> a deploy profile that explains itself (DESIGN §2a).

A profile is derived, never hand-typed: class, memory pools and the budget pool, threads, dtype,
backends, runtime target, and per pipeline the quantization that fits, the budget, the load-time
estimate, the TTS chunk schedule and the S1-S5 decisions. Every rule that fired is in ``rules``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from edgelab.catalog.devices import DeviceCatalog, load_devices
from edgelab.catalog.pipelines import PipelineSpec, load_pipeline, load_pipelines, resolve_pipeline_id
from edgelab.catalog.rules import ram_bytes
from edgelab.probe.facts import Facts
from edgelab.profile import device as dev
from edgelab.profile.budget import Pool
from edgelab.profile.classify import Classification, classify
from edgelab.profile.defaults import CLASS_DEFAULTS, GIB, ClassDefaults
from edgelab.profile.device import Rule, Rules
from edgelab.profile.fit import Fit, chunk_schedule, fit_pipeline
from edgelab.profile.strategies import StrategyDecision, decide


@dataclass
class PipelineProfile:
    pipeline: str
    kind: str
    fit: Fit
    strategies: list[StrategyDecision]
    provisional: bool = False

    @property
    def quantization(self) -> str | None:
        return self.fit.quantization

    def strategy(self, sid: str) -> StrategyDecision:
        return next(s for s in self.strategies if s.strategy == sid)

    @property
    def eligible(self) -> list[str]:
        return [s.strategy for s in self.strategies if s.eligible]

    def to_dict(self) -> dict[str, Any]:
        return {
            "pipeline": self.pipeline,
            "kind": self.kind,
            "provisional": self.provisional,
            **self.fit.to_dict(),
            "strategies": [s.to_dict() for s in self.strategies],
            "eligible": self.eligible,
        }


@dataclass
class DeployProfile:
    device_class: str
    classification: Classification
    defaults: ClassDefaults
    pools: list[Pool]
    budget_pool: Pool | None
    threads: int | None
    thread_cpus: list[int]
    dtype: str
    backends: list[str]
    runtime_target: str | None
    runtime_targets: list[str]
    pipelines: list[PipelineProfile] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    endpoint_configured: bool = False

    def pipeline(self, pipeline_id: str) -> PipelineProfile:
        return next(p for p in self.pipelines if p.pipeline == pipeline_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "class": self.device_class,
            "entry": self.classification.entry_id,
            "classification": self.classification.to_dict(),
            "defaults": self.defaults.to_dict(),
            "pools": [p.to_dict() for p in self.pools],
            "budget_pool": self.budget_pool.to_dict() if self.budget_pool else None,
            "threads": self.threads,
            "thread_cpus": self.thread_cpus,
            "dtype": self.dtype,
            "backends": self.backends,
            "runtime_target": self.runtime_target,
            "runtime_targets": self.runtime_targets,
            "endpoint_configured": self.endpoint_configured,
            "pipelines": [p.to_dict() for p in self.pipelines],
            "rules": [r.to_dict() for r in self.rules],
        }

    def explain(self) -> list[str]:
        """One line per rule, in the order they fired: what ``edgelab profile --explain`` prints."""
        return [f"{r.name}: {r.result!r} <- {r.why}" for r in self.rules]


def derive_profile(
    facts: Facts,
    catalog: DeviceCatalog,
    pipeline: str | PipelineSpec | None = None,
    *,
    endpoint_configured: bool = False,
    pipelines: dict[str, PipelineSpec] | None = None,
) -> DeployProfile:
    """The deploy profile for one device; ``pipeline=None`` profiles every packaged pipeline."""
    rules = Rules()
    cls = classify(facts, catalog)
    for reason in cls.reasons:
        rules.fire("classify", {"raw_ids": cls.raw_ids}, cls.entry_id, reason)
    rules.fire(
        "device_class",
        {"entry": cls.entry_id, "generic": cls.generic_class},
        cls.device_class,
        "from the catalog entry" if cls.entry else "from the generic rules (no catalog entry)",
    )
    defaults = CLASS_DEFAULTS[cls.device_class]
    rules.fire(
        "class_defaults",
        {"class": cls.device_class},
        defaults.to_dict(),
        "the study's per-class defaults table (DESIGN §2a)",
    )
    pools, budget_pool = dev.memory_pools(facts, cls.device_class, cls.entry, rules)
    n_threads, cpus = dev.threads(facts, rules)
    dtype = dev.dtype(facts, cls.device_class, cls.entry, rules)
    backends = dev.backends(facts, cls.device_class, cls.entry, rules)
    target, targets = dev.runtime_target(facts, cls.device_class, cls.entry, rules)

    if isinstance(pipeline, PipelineSpec):
        specs = [pipeline]
    elif isinstance(pipeline, str):
        specs = [
            pipelines[resolve_pipeline_id(pipeline, pipelines)] if pipelines else load_pipeline(pipeline)
        ]
    else:
        specs = list((pipelines or load_pipelines()).values())
    ram = budget_pool.total_bytes if budget_pool and budget_pool.kind != "vram" else ram_bytes(facts)
    profiles = []
    for spec in specs:
        fit = fit_pipeline(spec, budget_pool, dtype, defaults, rules)
        fit.chunk_schedule = chunk_schedule(spec, defaults, rules)
        device_fit = None
        if endpoint_configured and spec.device_stages_s4:
            device_fit = fit_pipeline(
                spec,
                budget_pool,
                dtype,
                defaults,
                rules,
                stages=spec.device_stages_s4,
                label=f"{spec.id}.s4_device_side",
            )
        decisions = decide(
            spec,
            cls.device_class,
            cls.entry,
            fit,
            device_fit,
            target,
            ram,
            endpoint_configured,
            software=facts.software,
        )
        for d in decisions:
            rules.fire(
                f"{spec.id}.{d.strategy}",
                {"class": cls.device_class, "endpoint": endpoint_configured},
                "eligible" if d.eligible else "refused",
                d.reason,
            )
        profiles.append(PipelineProfile(spec.id, spec.kind, fit, decisions, spec.provisional))
    return DeployProfile(
        cls.device_class,
        cls,
        defaults,
        pools,
        budget_pool,
        n_threads,
        cpus,
        dtype,
        backends,
        target,
        targets,
        profiles,
        rules.items,
        endpoint_configured,
    )


__all__ = ["DeployProfile", "PipelineProfile", "derive_profile", "GIB"]


def profile_from_facts(facts: dict[str, Any], pipeline: str | None = None) -> dict[str, Any]:
    """The deploy profile of stored facts (a probe snapshot's JSON) against the packaged catalog, as a
    plain dict: what `edgelab profile`, the device page and the deploy dialog show."""
    return derive_profile(Facts.from_dict(facts), load_devices(), pipeline=pipeline).to_dict()
