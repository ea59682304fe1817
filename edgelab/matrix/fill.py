"""What the lab already knows about each cell: its blocker, or the next step, from devices and plans.

For every cell the lab looks at the inventory devices that serve the cell's row (a device's
catalog entry, and the variant rows it also serves) and plans the column's pipeline on each,
the way ``deploy --dry-run`` does (no connection, nothing reserved):

- the profile's capacity refusal (no strategy fits: weights + activations + headroom over the
  pool) is a **rejected** cell, a feasibility blocker: no smaller model is substituted;
- a class no strategy serves is **blocked** by the device (feasibility);
- a plan whose runtime build, launch template or model is missing, or that only the reference
  imitation could run, is **blocked** for the lab to build (implementation), with the layer, the
  refusal as evidence and its remedy as the next experiment;
- a plan a real runtime can launch is the **next step**: the bench command on a real device of the
  row (a virtual device demonstrates the machinery and never qualifies: its next step is to add a
  real one);
- a row no device serves yet: the next step is to add and probe one.

A cell with real evidence keeps its stage; its next step is the ladder's next rung. ``fill``
writes blockers and next steps into the cells (source ``lab``), never over a decision made by
hand or a playbook: those cells only get their next step refreshed.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from edgelab.errors import EdgelabError, NotFound, Refusal, RefusalCode
from edgelab.matrix import ladder
from edgelab.matrix.cells import cell_snapshot, record_change
from edgelab.matrix.layout import COLUMNS, ROWS, cell_id
from edgelab.store.db import session_scope
from edgelab.store.matrix import MatrixCell

SOURCE = "lab"
_NO_FIT = (
    "none on this row: the model does not fit the device (a smaller model is another column, never "
    "substituted); re-probe if the device's memory changed"
)
PROTOCOL_ARGS = "--warmup 1 --requests 20"


@dataclass
class Finding:
    """One cell as the lab sees it now: a blocker (rejected/blocked) or the next step."""

    cell: str
    row_key: str
    pipeline: str
    outcome: str  # rejected | blocked | next
    device: str | None = None  # the device the finding is about (None: no device serves the row)
    virtual: bool | None = None
    kind: str | None = None  # feasibility | implementation (blockers only)
    layer: str | None = None
    reason: str = ""
    next_step: str = ""  # the command (or action) that moves the cell on
    evidence: dict[str, Any] = field(default_factory=dict)  # what showed it: source, code, numbers

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Unserved:
    """An inventory device that serves no matrix row, and why."""

    device: str
    entry: str | None
    device_class: str | None
    why: str


def serving(session: Session) -> tuple[dict[str, list[tuple[str, bool]]], list[Unserved]]:
    """Row key -> [(device, virtual)] (real devices first) from each device's latest probe, and the
    devices that serve no row."""
    from edgelab.catalog.devices import load_devices
    from edgelab.probe.facts import Facts
    from edgelab.profile.classify import classify
    from edgelab.store.devices import list_devices
    from edgelab.store.snapshots import latest_snapshot

    catalog = load_devices()
    rows = {r.key for r in ROWS}
    by_row: dict[str, list[tuple[str, bool]]] = {}
    unserved: list[Unserved] = []
    for dev in list_devices(session):
        try:
            snap = latest_snapshot(session, dev.name)
        except NotFound:
            unserved.append(
                Unserved(dev.name, None, dev.device_class, "never probed: `edgelab probe " + dev.name + "`")
            )
            continue
        c = classify(Facts.from_dict(snap.facts or {}), catalog)
        entries = ([c.entry.id] if c.entry else []) + [a.split(" ")[0] for a in c.also_serves]
        served = [e for e in entries if e in rows]
        for e in served:
            by_row.setdefault(e, []).append((dev.name, bool(dev.virtual)))
        if not served:
            entry = c.entry.id if c.entry else None
            why = (
                f"catalog entry {entry} ({c.device_class}) is none of the study's 12 rows (DESIGN §6): "
                "its runs are kept as runs, never as a cell's evidence"
                if entry
                else "matches no catalog entry, so no row: " + "; ".join(c.reasons[:1])
            )
            unserved.append(Unserved(dev.name, entry, c.device_class, why))
    for devs in by_row.values():
        devs.sort(key=lambda d: (d[1], d[0]))  # real devices first
    return by_row, unserved


def _layer(r: Refusal) -> str:
    """The failing layer of a plan's refusal, from its first (most preferred) candidate's gap."""
    text = r.detail.split(" | also tried:", 1)[0]
    if "build for" in text or "launch template" in text or "is written for" in text or "runtime" in r.code:
        return "runtime"
    if "model for" in text or "artifacts that are not registered" in text:
        return "artifact"
    return "runtime" if r.code == RefusalCode.WEIGHT_FORMAT_UNSUPPORTED else "other"


def _bench(pipeline: str, device: str) -> str:
    return f"edgelab bench {pipeline} --device {device} {PROTOCOL_ARGS}"


def assess_cell(engine: Engine, cell: MatrixCell, devices: list[tuple[str, bool]]) -> Finding:
    """The finding for one cell, from the first device serving its row (real ones first)."""
    from edgelab.deploy import planning
    from edgelab.deploy.planning import DeployRequest

    f = Finding(cell.id, cell.row_key, cell.pipeline, "next")
    if not devices:
        f.reason = f"no device in the inventory serves row {cell.row} ({cell.row_label})"
        f.next_step = (
            f"add a device of this configuration and probe it (`edgelab device add NAME --ssh USER@HOST` "
            f"or `--adb SERIAL`, then `edgelab probe NAME`): it must classify as {cell.row_key}"
        )
        return f
    name, virtual = devices[0]
    f.device, f.virtual = name, virtual
    try:
        planned = planning.plan(engine, DeployRequest(name, cell.pipeline))
    except Refusal as r:  # no strategy at all for this class
        return _blocked(f, r, "feasibility", "device", source="plan")
    except EdgelabError as err:
        f.reason, f.next_step = (
            str(err),
            err.remedy or f"edgelab deploy {cell.pipeline} --device {name} --dry-run",
        )
        return f
    pp = planned.profile.pipeline(planned.plan.pipeline)
    r = planned.refusal
    if (
        r is not None
        and r.code == RefusalCode.BUDGET_EXCEEDS_DEVICE
        and not (r.numbers or {}).get("reserved")
    ):
        # nothing else holds the pool and still it does not fit: capacity, the device's
        f.outcome, f.kind, f.layer = "rejected", "feasibility", "memory"
        f.reason, f.next_step = r.detail, _NO_FIT
        f.evidence = {
            "source": "admission",
            "device": name,
            "code": r.code,
            "pool": r.pool,
            "numbers": dict(r.numbers or {}),
            "command": f"edgelab deploy {cell.pipeline} --device {name} --dry-run",
        }
        return f
    if not pp.eligible and any(d.code == RefusalCode.BUDGET_EXCEEDS_DEVICE for d in pp.strategies):
        b = pp.fit.budget
        f.outcome, f.kind, f.layer = "rejected", "feasibility", "memory"
        f.reason = next(d.reason for d in pp.strategies if d.code == RefusalCode.BUDGET_EXCEEDS_DEVICE)
        f.next_step = _NO_FIT
        f.evidence = {
            "source": "profile",
            "device": name,
            "code": RefusalCode.BUDGET_EXCEEDS_DEVICE,
            "pool": b.pool if b else None,
            "pool_bytes": b.pool_bytes if b else None,
            "weights_bytes": b.weights_bytes if b else None,
            "quantization": b.quantization if b else None,
            "command": f"edgelab profile {name} --pipeline {cell.pipeline} --explain",
        }
        return f
    gap = planned.unlaunchable  # (an admission refusal while others hold the pool is now, not capacity)
    if gap is not None:
        return _blocked(f, gap, "implementation", _layer(gap), source="plan")
    p = planned.plan
    if p.runtime == "reference":  # only the imitation could launch: no real runtime here yet
        f.outcome, f.kind, f.layer = "blocked", "implementation", "runtime"
        f.reason = "only the reference imitation can launch here: " + p.reason.split("can launch here (", 1)[
            -1
        ].rstrip(")")
        f.next_step = (
            "build and register a real runtime for this device's target and the pipeline's model "
            f"(`edgelab deploy {cell.pipeline} --device {name} --runtime RUNTIME --dry-run` names what is missing)"
        )
        f.evidence = {
            "source": "plan",
            "device": name,
            "strategy": p.strategy,
            "runtime": p.runtime,
            "command": f"edgelab deploy {cell.pipeline} --device {name} --dry-run",
        }
        return f
    f.reason = f"{p.strategy} on {p.runtime} can launch on {name}"
    f.evidence = {"source": "plan", "device": name, "strategy": p.strategy, "runtime": p.runtime}
    if virtual:  # a virtual device demonstrates the machinery, never qualifies
        f.next_step = (
            f"add a real device of row {cell.row}, probe it, then `{_bench(cell.pipeline, 'DEVICE')}` "
            f"(here only a demonstration: `{_bench(cell.pipeline, name)}`)"
        )
    else:
        f.next_step = _next_rung(cell, name)
    return f


def _next_rung(cell: MatrixCell, device: str) -> str:
    if cell.stage in ("none", "artifact_ready", "correct"):
        return f"{_bench(cell.pipeline, device)}, then `edgelab matrix set {cell.id} --status PASS --evidence RUN`"
    if cell.stage == "executes":
        return (
            f"profile it with the gates: `edgelab play playbooks/nightly-matrix.yaml --limit {device}` "
            f"(or {_bench(cell.pipeline, device)} and `matrix set --stage profiled --performance PASS`)"
        )
    if cell.stage == "profiled":
        return f"qualify: `edgelab matrix set {cell.id} --stage qualified --evidence RUN` on a run that meets every gate"
    return "qualified: nothing to do"


def _blocked(f: Finding, r: Refusal, kind: str, layer: str, *, source: str) -> Finding:
    f.outcome, f.kind, f.layer = "blocked", kind, layer
    f.reason = r.detail
    f.next_step = r.remedy or "see `edgelab deploy --dry-run`"
    f.evidence = {
        "source": source,
        "device": f.device,
        "code": r.code,
        "strategy": r.strategy,
        "numbers": {k: v for k, v in (r.numbers or {}).items() if k != "tried"},
        "command": f"edgelab deploy {f.pipeline} --device {f.device} --dry-run",
    }
    return f


def assess(engine: Engine) -> tuple[list[Finding], list[Unserved]]:
    """Every study cell's finding, and the inventory devices that serve no row."""
    from edgelab.matrix.cells import matrix_rows

    with session_scope(engine) as s:
        cells = [c for c in matrix_rows(s)]
        by_row, unserved = serving(s)
        for c in cells:
            s.expunge(c)
    wanted = {cell_id(r.key, col.key) for r in ROWS for col in COLUMNS}
    return [assess_cell(engine, c, by_row.get(c.row_key, [])) for c in cells if c.id in wanted], unserved


def _ours(cell: MatrixCell) -> bool:
    """A cell the lab may rewrite: untouched since the seed, or last written by a fill."""
    return cell.updated_by in (None, "seed", SOURCE) and not cell.evidence


def fill(engine: Engine) -> tuple[list[Finding], list[Unserved], int]:
    """Write every finding into its cell (blockers and next steps); returns them and how many cells
    changed. Cells decided by hand or by a playbook keep their stage: only their next step moves."""
    findings, unserved = assess(engine)
    changed = 0
    with session_scope(engine) as s:
        for f in findings:
            cell = s.get(MatrixCell, f.cell)
            if cell is None:
                continue
            before = cell_snapshot(cell)
            ours = _ours(cell)
            if ours:
                if f.outcome in ("rejected", "blocked"):
                    cell.stage = f.outcome
                    cell.functional = "REJECTED" if f.outcome == "rejected" else "BLOCKED"
                    cell.failing_layer, cell.blocker_kind = f.layer, f.kind
                    cell.reason, cell.blocker_evidence = f.reason[:2000], f.evidence
                else:
                    cell.stage, cell.functional = "none", None
                    cell.failing_layer = cell.blocker_kind = cell.blocker_evidence = None
                    cell.reason = f.reason[:2000]
            elif cell.stage in ladder.ENDS:
                continue  # blocked or rejected by hand: its own next experiment stands
            cell.next_experiment = f.next_step[:2000]
            if cell_snapshot(cell) == before:
                continue
            record_change(s, cell, before, SOURCE, [], f"{f.outcome}: {f.reason}"[:2000], owner=ours)
            changed += 1
    return findings, unserved, changed
