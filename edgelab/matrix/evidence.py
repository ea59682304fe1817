"""What a run must show before it can move a matrix cell to ``profiled`` or ``qualified``.

The study's cells are claims about a model on a device; a claim stands on runs. A run is
evidence for cell (row, column) only if it:

1. finished, on a real (non-virtual) device that the catalog maps to that row (the device's
   latest probe matched the row's catalog entry);
2. ran that column's pipeline;
3. ran a real runtime (not ``reference``) with real weights (not ``random``, not unknown);
4. followed ``single_request_batch1_v1``: at least 1 warm-up and 20 measured requests per
   length band (VLA: control ticks, counted as action chunks);
5. carries complete provenance (runtime build and SHA-256, artifact SHA-256s, weights, cache and
   power condition, device facts hash, edgelab version); a missing or ``unknown`` field makes it
   incomplete.

Each failed condition is one line naming the run and the condition, so a refusal says why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlmodel import Session, select

from edgelab.errors import EvidenceRefused, NotFound
from edgelab.matrix.layout import column_by, row_by
from edgelab.states import RunState
from edgelab.store.models import Device
from edgelab.store.runs import Run, RunRequest, RunSample, execution_of, get_run

PROTOCOL = "single_request_batch1_v1"
MIN_WARMUP = 1
MIN_MEASURED = 20
# provenance fields a result must state (None or "unknown" = incomplete)
REQUIRED_PROVENANCE = (
    "device",
    "facts_hash",
    "runtime",
    "runtime_build",
    "runtime_sha256",
    "artifacts",
    "weights",
    "cache",
    "power",
    "edgelab_version",
)
UNKNOWN = "unknown"


@dataclass
class Verdict:
    run: str
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures

    def as_dict(self) -> dict[str, Any]:
        return {"run": self.run, "ok": self.ok, "failures": list(self.failures)}


def missing_provenance(prov: dict[str, Any], meta: dict[str, Any] | None = None) -> list[str]:
    """The required provenance fields a result leaves null or ``unknown``."""
    meta = meta or {}
    out = []
    for key in REQUIRED_PROVENANCE:
        v = prov.get(key)
        if v is None and key == "weights":
            v = meta.get("weights")
        if v is None or v == UNKNOWN or (isinstance(v, dict) and not v and key != "artifacts"):
            out.append(key)
        elif key == "artifacts" and isinstance(v, dict) and any(s in (None, UNKNOWN) for s in v.values()):
            out.append(key)
    return out


def _device_row(session: Session, run: Run) -> tuple[str | None, str | None]:
    """(catalog entry of the run's device, or None; why not)."""
    if not run.device_name:
        return None, "ran on no inventory device (an external endpoint without --device, or an import)"
    dev = session.exec(select(Device).where(Device.name == run.device_name)).first()
    if dev is None:
        return None, f"device {run.device_name} is not in the inventory"
    from edgelab.store.snapshots import latest_snapshot

    try:
        entry = latest_snapshot(session, run.device_name).catalog_entry
    except NotFound:
        return None, f"device {run.device_name} was never probed, so the catalog maps it to no row"
    if entry is None:
        return None, f"device {run.device_name} matches no catalog entry"
    return entry, None


def _protocol(session: Session, run: Run) -> list[str]:
    meta = run.meta or {}
    if meta.get("protocol") != PROTOCOL:
        return [f"did not follow {PROTOCOL} (protocol {meta.get('protocol') or 'not recorded'})"]
    reqs = session.exec(select(RunRequest).where(RunRequest.run_id == run.id)).all()
    actions = session.exec(
        select(RunSample.request).where(RunSample.run_id == run.id, RunSample.kind == "action")
    ).all()
    counts: dict[str, dict[str, int]] = {}
    if actions:  # VLA: the measured units are control ticks (action chunks)
        phase = {r.request: r.phase for r in reqs}
        for rq in actions:
            counts.setdefault("control", {}).setdefault(phase.get(rq, "measured"), 0)
            counts["control"][phase.get(rq, "measured")] += 1
    else:
        for r in reqs:
            if r.ok is False:
                continue
            band = r.band or "unbanded"
            counts.setdefault(band, {}).setdefault(r.phase, 0)
            counts[band][r.phase] += 1
    if not counts:
        return ["has no successful measured requests"]
    out = []
    for band, by in sorted(counts.items()):
        w, m = by.get("warmup", 0), by.get("measured", 0) + by.get("sustained", 0)
        if w < MIN_WARMUP or m < MIN_MEASURED:
            out.append(
                f"protocol: band {band} has {w} warm-up and {m} measured (needs >= {MIN_WARMUP} and "
                f">= {MIN_MEASURED})"
            )
    return out


def judge_run(session: Session, run: Run, row_key: str, pipeline: str) -> Verdict:
    """Every condition this run fails as evidence for cell (row_key, pipeline)."""
    v = Verdict(run.id)
    f = v.failures
    if run.state != RunState.FINISHED:
        f.append(f"state {run.state}, not finished")
    dev_virtual = False
    if run.device_name:
        dev = session.exec(select(Device).where(Device.name == run.device_name)).first()
        dev_virtual = bool(dev and dev.virtual)
    if run.virtual or dev_virtual or (run.provenance or {}).get("virtual"):
        f.append(f"ran on virtual device {run.device_name}: demonstrates the machinery, never qualifies")
    ex = execution_of(run)
    if ex.get("emulated"):
        f.append(
            f"emulated ({ex.get('emulator')}, {ex.get('target')}): an emulator's figures, never a device's"
        )
    entry, why = _device_row(session, run)
    row = row_by(row_key)
    if why:
        f.append(why)
    elif entry != row_key:
        other = row_by(entry)
        f.append(
            f"device {run.device_name} is catalog entry {entry}"
            f"{f' (row {other.index})' if other else ' (no matrix row)'}, not row {row.index if row else '?'} "
            f"{row_key}"
        )
    col = column_by(run.pipeline or "")
    if col is None or col.key != pipeline:
        f.append(f"ran pipeline {run.pipeline or 'unknown'}, not this column's {pipeline}")
    prov, meta = run.provenance or {}, run.meta or {}
    runtime = run.runtime or prov.get("runtime")
    if runtime in (None, UNKNOWN):
        f.append("runtime unknown")
    elif runtime == "reference":
        f.append("ran the reference runtime (numpy on random weights), not a real runtime")
    weights = prov.get("weights") or meta.get("weights")
    if weights == "random":
        f.append("weights: random")
    elif weights in (None, UNKNOWN):
        f.append("weights unknown (random or real not recorded)")
    f.extend(_protocol(session, run))
    missing = [k for k in missing_provenance(prov, meta) if k not in ("weights", "runtime")]
    if missing:
        f.append(f"provenance incomplete: {', '.join(missing)} unknown")
    return v


def judge(session: Session, run_ids: list[str], row_key: str, pipeline: str) -> list[Verdict]:
    return [judge_run(session, get_run(session, rid), row_key, pipeline) for rid in run_ids]


def require(
    session: Session, cell_id: str, row_key: str, pipeline: str, run_ids: list[str], target: str
) -> None:
    """Raise EvidenceRefused unless every run is evidence for the cell; the message names each failure."""
    if not run_ids:
        raise EvidenceRefused(f"refusing to move {cell_id} to {target}: no evidence runs", [])
    verdicts = judge(session, run_ids, row_key, pipeline)
    bad = [v for v in verdicts if not v.ok]
    if bad:
        lines = "; ".join(f"run {v.run}: {', '.join(v.failures)}" for v in bad)
        raise EvidenceRefused(f"refusing to move {cell_id} to {target}: {lines}", verdicts)
