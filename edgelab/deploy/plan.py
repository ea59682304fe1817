"""An execution plan: what a strategy decided to run where, before anything touches the device.

A plan is plain data (``to_dict`` round-trips through JSON), so a dry run prints exactly what a
real deploy would push and start, and the stored run keeps the plan it was launched from. Whoever
reads a stored plan back (the follower, stop, reap, bench, the UIs) reads it through
:meth:`ExecutionPlan.from_dict`, which keeps the typed fields (a process's ``adapter``,
``placement`` and readiness kind are the runtime spec's enums) and tolerates a plan written by
another edgelab version (fields it does not know are left out, missing ones take their defaults).
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, TypeVar

from edgelab.deploy.artifact_need import ArtifactNeed, ResolvedArtifact, artifact_from_dict
from edgelab.runtimes.spec import (
    ADAPTERS,
    PLACEMENT_EVIDENCE,
    READY_KINDS,
    Adapter,
    PlacementSource,
    ReadyKind,
)

T = TypeVar("T")


@dataclass
class StagePlan:
    """One pipeline stage: which runtime and backend run it, and where it is meant to run."""

    name: str
    role: str
    runtime: str  # e.g. vllm-omni, llama.cpp, mnn, executorch, reference, server
    backend: str  # e.g. cuda, opencl, qnn, cpu, remote
    placement: str  # intended: gpu, npu, cpu, server
    artifacts: list[str] = field(default_factory=list)  # artifact roles this stage needs on the device
    process: str | None = None  # name of the process that hosts the stage


@dataclass
class ProcessSpec:
    """One process to start on the device, detached, rendered from a runtime's launch template.

    ``argv``/``env`` may still hold ``{bin}`` (the process's run directory of store links) and
    ``{blob:SHA}`` (a pushed blob's store path): both are bound on the device at launch.
    """

    name: str
    argv: list[str]
    ready_pattern: str | None = (
        None  # regex a stdout line matches once the process is ready; None: alive is ready
    )
    env: dict[str, str] = field(default_factory=dict)
    runtime: str | None = None  # the runtime whose template this is
    template: str | None = None  # runtime:key:strategy, e.g. llama.cpp:text_lm:S3
    target: str | None = None  # the build target the launch is for (the lab host's on a virtual device)
    adapter: str = Adapter.NONE  # what reads its output (an Adapter)
    placement: str = PlacementSource.NONE  # where placement evidence comes from (a PlacementSource)
    ready: dict[str, Any] = field(default_factory=dict)  # {kind: a ReadyKind, pattern, path, port}
    port: int | None = None  # the port it serves on the device (forwarded to the lab for readiness/clients)
    serves: str | None = None  # its endpoint as seen on the device
    library_path: list[str] = field(default_factory=list)
    workdir: str = "run"  # run: its own run directory; bin: the link directory
    links: dict[str, str] = field(default_factory=dict)  # name in {bin} -> sha256 of the store blob
    values: dict[str, str] = field(default_factory=dict)  # the template values it was rendered with
    unavailable: str | None = None  # why it cannot be launched here (no template for the target ...)
    files: dict[str, str] = field(default_factory=dict)  # name -> text written into its workdir first
    dirs: dict[str, dict[str, str]] = field(default_factory=dict)  # {dir:NAME} -> {relpath: sha256}

    @property
    def ready_kind(self) -> ReadyKind:
        """Its readiness check (a template without one: a log pattern, else alive)."""
        kind = (self.ready or {}).get("kind") or (ReadyKind.LOG if self.ready_pattern else ReadyKind.ALIVE)
        return ReadyKind(kind) if kind in READY_KINDS else ReadyKind.ALIVE

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProcessSpec:
        proc = _build(cls, data)
        if proc.adapter in ADAPTERS:
            proc.adapter = Adapter(proc.adapter)
        if proc.placement in PLACEMENT_EVIDENCE:
            proc.placement = PlacementSource(proc.placement)
        return proc


def programs(proc: ProcessSpec) -> set[str]:
    """Names in ``{bin}`` the argv runs (``{bin}/llama-server``): those need the execute bit."""
    return {w.split("{bin}/", 1)[1].split("/")[0] for w in proc.argv if "{bin}/" in w}


@dataclass
class ExecutionPlan:
    pipeline: str
    device: str
    strategy: str
    runtime: str
    reason: str  # why this strategy (or the override that chose it)
    stages: list[StagePlan]
    processes: list[ProcessSpec]
    memory: dict[str, int]  # pool name -> bytes this plan reserves
    memory_detail: dict[str, Any] = field(default_factory=dict)  # weights / activations / kv / quantization
    endpoints: list[str] = field(default_factory=list)  # what the deployment serves or talks to
    expected_outputs: list[str] = field(default_factory=list)  # metrics kinds: audio, action, text
    artifacts: list[ArtifactNeed] = field(default_factory=list)  # needs; resolved: ResolvedArtifact
    remote_dir: str = ""  # the run's directory on the device
    ready_timeout_s: float = 30.0
    notes: list[str] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)  # strategies not taken and why
    virtual: bool = False  # a virtual device: its commands (and the lab host's build) run on the lab host
    runtime_info: dict[str, Any] = field(default_factory=dict)  # a device-installed runtime as probed (S1)
    # how a virtual device runs its build (edgelab.runtimes.emulation.Execution.to_dict): mode
    # native | emulated | lab-host-build, target, emulator, label; {} on a real device
    execution: dict[str, Any] = field(default_factory=dict)

    @property
    def emulated(self) -> bool:
        return bool(self.execution.get("emulated"))

    def present_artifacts(self) -> list[ResolvedArtifact]:
        """The artifacts resolution found in the registry (what is pushed and bound)."""
        return [a for a in self.artifacts if isinstance(a, ResolvedArtifact) and a.present]

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["artifacts"] = [a.to_dict() for a in self.artifacts]  # the stored shape: see artifact_need
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> ExecutionPlan:
        """The plan ``to_dict`` wrote (or a stored one: see the module doc); ``None``: an empty plan."""
        d = dict(data or {})
        d["stages"] = [_build(StagePlan, s) for s in d.get("stages") or []]
        d["processes"] = [ProcessSpec.from_dict(p) for p in d.get("processes") or []]
        d["artifacts"] = [
            a if isinstance(a, ArtifactNeed) else artifact_from_dict(a) for a in d.get("artifacts") or []
        ]
        return _build(cls, d)


_EMPTY: dict[str, Any] = {"str": str, "list": list, "dict": dict, "int": int, "float": float, "bool": bool}


def _build(cls: type[T], data: dict[str, Any]) -> T:
    """``cls(**data)`` with the fields it knows; a required field that is missing gets its type's empty value."""
    kw: dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name in data:
            kw[f.name] = data[f.name]
        elif f.default is MISSING and f.default_factory is MISSING:
            empty = _EMPTY.get(str(f.type).split("[")[0])
            kw[f.name] = empty() if empty is not None else None
    return cls(**kw)
