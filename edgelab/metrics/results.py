"""Results with provenance, and import of the study's per-request records.

Every stored summary carries the provenance block of DESIGN §5: device and facts hash,
runtime build and its SHA-256, artifact SHA-256s, strategy, profile, exact command,
edgelab version and git state, cache and power condition, and whether the device was
virtual. What is not known is null, so a reader can tell "not recorded" from "none".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Engine
from sqlmodel import Session

from edgelab.errors import NotFound
from edgelab.labels import strategy_label
from edgelab.metrics.ingest import finalize
from edgelab.metrics.provenance import run_provenance
from edgelab.store.db import session_scope
from edgelab.store.runs import Run, create_run


def start_run(
    engine: Engine,
    *,
    pipeline: str | None,
    device: str | None,
    runtime: str | None = None,
    strategy: str | None = None,
    profile: str | None = None,
    kind: str = "bench",
    command: Sequence[str] | str | None = None,
    virtual: bool | None = None,
    runtime_build: str | None = None,
    runtime_sha256: str | None = None,
    artifacts: dict[str, str] | None = None,
    cache: str | None = None,
    power: str | None = None,
    meta: dict[str, Any] | None = None,
) -> str:
    """Create a pending run with its provenance block filled from the device's latest probe;
    returns the run id to stamp on events and hand to ``Ingestor``."""
    with session_scope(engine) as s:
        prov = run_provenance(
            s,
            source=kind,
            device=device,
            virtual=virtual,
            runtime=runtime,
            runtime_build=runtime_build,
            runtime_sha256=runtime_sha256,
            artifacts=artifacts,
            strategy=strategy,
            profile=profile,
            command=command,
            cache=cache,
            power=power,
        )
        run = create_run(
            s,
            pipeline=pipeline,
            device_name=device,
            runtime=runtime,
            strategy=strategy,
            profile=profile,
            kind=kind,
            virtual=bool(prov["virtual"]),
            command=prov["command"],
            provenance=prov,
            meta=dict(meta or {}),
        )
        return run.id


def verify_recompute(engine: Engine, run_id: str) -> bool:
    """True when the stored final summary equals a fresh recompute from the stored raw samples."""
    from edgelab.store.runs import get_summary

    with session_scope(engine, write=False) as s:
        row = get_summary(s, run_id, "final")
        if row is None:
            raise NotFound(
                f"run {run_id} has no final summary", remedy="finish the run (Ingestor.close) first"
            )
        stored = {k: v for k, v in row.metrics.items() if k != "live_equals_final"}
    fresh = json.loads(json.dumps(finalize(engine, run_id)))  # as the JSON column stores it
    return fresh == stored


# --- the study's requests.jsonl (validated, then written in one transaction: edgelab.metrics.study) -----


def read_requests(path: Path) -> list[dict[str, Any]]:
    """The study's per-request records, validated; errors name file and line (every bad one)."""
    from edgelab.metrics.study import read_records

    return [r.model_dump() for r in read_records(Path(path))]


def import_study(
    engine: Engine,
    path: str | Path,
    *,
    device: str | None = None,
    pipeline: str | None = None,
    virtual: bool | None = None,
) -> str:
    """Store a study run (``requests.jsonl`` + optional ``report.json``) as an imported run and
    recompute every metric from its raw chunks; returns the run id. All or nothing."""
    from edgelab.metrics.study import load_input, write_inputs

    return write_inputs(engine, [load_input(Path(path))], device=device, pipeline=pipeline, virtual=virtual)[
        0
    ]


def import_tree(engine: Engine, path: str | Path, **kwargs: Any) -> list[str]:
    """Import ``path`` (a requests.jsonl or a directory holding one) or, for a directory of study
    runs, every ``requests.jsonl`` below it, each as its own run; returns the run ids in path order.
    Every input is validated before the first is written, and all are written in one transaction."""
    from edgelab.metrics.study import import_paths

    return import_paths(engine, path, **kwargs)


def run_record(session: Session, run: Run) -> dict[str, Any]:
    """A run as plain data (for ``runs show/export --json`` and reports)."""
    from edgelab.store.runs import execution_of, get_summary, requests_of

    final = get_summary(session, run.id, "final")
    live = get_summary(session, run.id, "live")
    ex = execution_of(run)
    return {
        "id": run.id,
        "pipeline": run.pipeline,
        "device": run.device_name,
        "runtime": run.runtime,
        "strategy": run.strategy,
        "strategy_label": strategy_label(run.strategy, run.runtime),
        "profile": run.profile,
        "kind": run.kind,
        "state": run.state,
        "virtual": run.virtual,
        "emulated": bool(ex.get("emulated")),
        "execution": ex or None,
        "command": run.command,
        "error": run.error,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "provenance": run.provenance,
        "meta": run.meta,
        "summary": final.metrics if final else None,
        "live": live.metrics if live and not final else None,
        "requests": [
            {
                "request": r.request,
                "phase": r.phase,
                "band": r.band,
                "submitted": r.submitted,
                "finished": r.finished,
                "ok": r.ok,
                "error": r.error,
                "metrics": r.metrics,
            }
            for r in requests_of(session, run.id)
        ],
        "telemetry": telemetry_record(session, run),
    }


def telemetry_record(session: Session, run: Run, last: int = 20) -> dict[str, Any]:
    """The run's telemetry: how many samples, from which sampler, and the latest ``last`` of them."""
    from sqlalchemy import func
    from sqlmodel import select

    from edgelab.store.runs import TelemetrySample, telemetry_of

    count = session.exec(
        select(func.count()).select_from(TelemetrySample).where(TelemetrySample.run_id == run.id)
    ).one()
    rows = telemetry_of(session, run_id=run.id, limit=last)
    return {
        "samples": int(count),
        "sampler": (run.meta or {}).get("telemetry"),
        "latest": [
            {
                "t": r.t,
                "source": r.source,
                "virtual": r.virtual,
                "cpu_pct": r.cpu_pct,
                "mem_available_bytes": r.mem_available_bytes,
                "rss_bytes": r.rss_bytes,
                "gpu_util_pct": r.gpu_util_pct,
                "throttled": r.throttled,
                "temps_c": r.temps_c,
                "clocks_mhz": r.clocks_mhz,
                "power_w": r.power_w,
                "raw": r.raw,
            }
            for r in rows
        ],
    }
