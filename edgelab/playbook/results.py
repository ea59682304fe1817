"""What a playbook run produced: per job (device x pipeline) and per step, each failure classified.

Classes (the KernelCI lesson: never mix lab trouble with test failures):
``infra`` the lab could not do the step (connection, missing tool or API, step timeout),
``device`` the device misbehaved (offline, crashed workload, refused plan),
``test`` the workload ran and missed its gate or its correctness check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from edgelab.credentials import mask_text

CATEGORIES = ("infra", "device", "test")


class StepStatus(StrEnum):
    """A playbook step's outcome (JUnit: failed -> failure or error, interrupted -> error, skipped)."""

    PENDING = "pending"
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    INTERRUPTED = "interrupted"  # the play was stopped while it ran


@dataclass
class StepResult:
    name: str
    kind: str
    status: str = StepStatus.PENDING
    category: str | None = None
    message: str = ""
    duration_s: float = 0.0
    run_id: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    cleanup: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "status": self.status,
            "category": self.category,
            "message": self.message,
            "duration_s": round(self.duration_s, 3),
            "run_id": self.run_id,
            "details": self.details,
            "cleanup": self.cleanup,
        }


@dataclass
class JobResult:
    device: str
    pipeline: str | None
    virtual: bool = False
    device_class: str | None = None
    facts_hash: str | None = None
    catalog_entry: str | None = None
    artifacts: dict[str, str] = field(default_factory=dict)  # file/artifact name -> sha256
    steps: list[StepResult] = field(default_factory=list)
    matrix: list[str] = field(default_factory=list)
    baselines: list[str] = field(default_factory=list)  # baselines this job moved (--update-baseline)
    duration_s: float = 0.0

    @property
    def label(self) -> str:
        return self.device if not self.pipeline else f"{self.device}/{self.pipeline}"

    @property
    def ok(self) -> bool:
        return all(s.status not in (StepStatus.FAILED, StepStatus.INTERRUPTED) for s in self.steps)

    @property
    def run_ids(self) -> list[str]:
        return list(dict.fromkeys(s.run_id for s in self.steps if s.run_id))

    def to_dict(self) -> dict[str, Any]:
        return {
            "device": self.device,
            "pipeline": self.pipeline,
            "ok": self.ok,
            "virtual": self.virtual,
            "device_class": self.device_class,
            "facts_hash": self.facts_hash,
            "catalog_entry": self.catalog_entry,
            "artifacts": dict(self.artifacts),
            "runs": self.run_ids,
            "matrix": list(self.matrix),
            "baselines": list(self.baselines),
            "duration_s": round(self.duration_s, 3),
            "steps": [s.to_dict() for s in self.steps],
        }


@dataclass
class PlayResult:
    playbook: str
    file: str
    jobs: list[JobResult]
    edgelab_version: str
    variables: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    interrupted: bool = False  # stopped by Ctrl-C: the current steps were cut short, cleanup ran
    cleanup_left: list[str] = field(default_factory=list)  # what a second Ctrl-C left for the next command

    @property
    def ok(self) -> bool:
        return not self.interrupted and all(j.ok for j in self.jobs)

    def failures(self) -> dict[str, int]:
        out = dict.fromkeys(CATEGORIES, 0)
        for j in self.jobs:
            for s in j.steps:
                if s.status == StepStatus.FAILED:
                    out[s.category or "infra"] += 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "playbook": self.playbook,
            "file": self.file,
            "ok": self.ok,
            "edgelab_version": self.edgelab_version,
            "variables": {k: mask_text(v) if isinstance(v, str) else v for k, v in self.variables.items()},
            "failures": self.failures(),
            "duration_s": round(self.duration_s, 3),
            "interrupted": self.interrupted,
            "cleanup_left": list(self.cleanup_left),
            "jobs": [j.to_dict() for j in self.jobs],
        }
