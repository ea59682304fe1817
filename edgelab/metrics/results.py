"""Results with provenance, and import of the study's per-request records.

Every stored summary carries the provenance block of DESIGN §5: device and facts hash,
runtime build and its SHA-256, artifact SHA-256s, strategy, profile, exact command,
edgelab version and git state, cache and power condition, and whether the device was
virtual. What is not known is null, so a reader can tell "not recorded" from "none".
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, insert
from sqlmodel import Session

import edgelab
from edgelab import __version__
from edgelab.errors import ConfigError, NotFound
from edgelab.metrics.ingest import _sample_sql, finalize
from edgelab.store.db import session_scope
from edgelab.store.runs import Run, RunRequest, create_run, get_run, put_summary
from edgelab.transport.quoting import Shell, join

PROVENANCE_KEYS = (
    "device", "device_class", "facts_hash", "virtual", "runtime", "runtime_build", "runtime_sha256",
    "artifacts", "strategy", "profile", "command", "edgelab_version", "git", "cache", "power", "source",
)


def git_state(path: Path | None = None) -> dict[str, Any] | None:
    """The commit and dirtiness of the edgelab checkout (None when not a git work tree)."""
    where = path or Path(edgelab.__file__).resolve().parent
    try:
        head = subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return {"commit": head.stdout.strip(), "dirty": bool(dirty.stdout.strip()) if dirty.returncode == 0 else None}


def provenance(session: Session | None = None, *, device: str | None = None, virtual: bool | None = None,
               runtime: str | None = None, runtime_build: str | None = None, runtime_sha256: str | None = None,
               artifacts: dict[str, str] | None = None, strategy: str | None = None, profile: str | None = None,
               command: Sequence[str] | str | None = None, cache: str | None = None, power: str | None = None,
               source: str | None = None) -> dict[str, Any]:
    """The provenance block. With a session and a device name, the device's latest probe gives
    its facts hash, class and virtual flag."""
    facts_hash = device_class = None
    if session is not None and device:
        from edgelab.store.snapshots import latest_snapshot

        try:
            snap = latest_snapshot(session, device)
            facts_hash, device_class = snap.facts_hash, snap.device_class
            if virtual is None:
                virtual = snap.virtual
        except NotFound:
            pass
    if cache not in (None, "cold", "warm"):
        raise ConfigError(f"cache condition {cache!r} is neither cold nor warm", remedy="pass cold or warm")
    cmd = command if command is None or isinstance(command, str) else join(list(command), Shell.POSIX)
    return {
        "device": device, "device_class": device_class, "facts_hash": facts_hash, "virtual": virtual,
        "runtime": runtime, "runtime_build": runtime_build, "runtime_sha256": runtime_sha256,
        "artifacts": dict(artifacts) if artifacts is not None else None,
        "strategy": strategy, "profile": profile, "command": cmd,
        "edgelab_version": __version__, "git": git_state(), "cache": cache, "power": power, "source": source,
    }


def start_run(engine: Engine, *, pipeline: str | None, device: str | None, runtime: str | None = None,
              strategy: str | None = None, profile: str | None = None, kind: str = "bench",
              command: Sequence[str] | str | None = None, virtual: bool | None = None,
              runtime_build: str | None = None, runtime_sha256: str | None = None,
              artifacts: dict[str, str] | None = None, cache: str | None = None, power: str | None = None,
              meta: dict[str, Any] | None = None) -> str:
    """Create a pending run with its provenance block filled from the device's latest probe;
    returns the run id to stamp on events and hand to ``Ingestor``."""
    with session_scope(engine) as s:
        prov = provenance(s, device=device, virtual=virtual, runtime=runtime, runtime_build=runtime_build,
                          runtime_sha256=runtime_sha256, artifacts=artifacts, strategy=strategy, profile=profile,
                          command=command, cache=cache, power=power, source=kind)
        run = create_run(s, pipeline=pipeline, device_name=device, runtime=runtime, strategy=strategy,
                         profile=profile, kind=kind, virtual=bool(prov["virtual"]), command=prov["command"],
                         provenance=prov, meta=dict(meta or {}))
        return run.id


def verify_recompute(engine: Engine, run_id: str) -> bool:
    """True when the stored final summary equals a fresh recompute from the stored raw samples."""
    from edgelab.store.runs import get_summary

    with session_scope(engine, write=False) as s:
        row = get_summary(s, run_id, "final")
        if row is None:
            raise NotFound(f"run {run_id} has no final summary", remedy="finish the run (Ingestor.close) first")
        stored = {k: v for k, v in row.metrics.items() if k != "live_equals_final"}
    fresh = json.loads(json.dumps(finalize(engine, run_id)))  # as the JSON column stores it
    return fresh == stored


# --- the study's requests.jsonl -------------------------------------------------------------------


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _find_files(path: Path) -> tuple[Path, Path | None]:
    if path.is_dir():
        req = path / "requests.jsonl"
        if not req.is_file():
            raise ConfigError(f"{path} holds no requests.jsonl", remedy="point at the study's run directory or file")
    elif path.is_file():
        req = path
    else:
        raise ConfigError(f"{path} does not exist", remedy="give the path of a requests.jsonl or its directory")
    report = req.parent / "report.json"
    return req, report if report.is_file() else None


def read_requests(path: Path) -> list[dict[str, Any]]:
    """The study's per-request records; errors name file and line."""
    out = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as err:
            raise ConfigError(f"{path}:{lineno}: not JSON ({err.msg})", remedy="fix or remove that line") from None
        missing = [k for k in ("request_id", "submitted_unix", "chunks_all") if k not in rec]
        if missing:
            raise ConfigError(f"{path}:{lineno}: record lacks {', '.join(missing)}",
                              remedy="requests.jsonl records need request_id, submitted_unix and chunks_all")
        out.append(rec)
    if not out:
        raise ConfigError(f"{path} holds no records", remedy="import a requests.jsonl with at least one request")
    return out


def import_study(engine: Engine, path: str | Path, *, device: str | None = None, pipeline: str | None = None,
                 virtual: bool | None = None) -> str:
    """Store a study run (``requests.jsonl`` + optional ``report.json``) as an imported run and
    recompute every metric from its raw chunks; returns the run id."""
    req_path, report_path = _find_files(Path(path))
    records = read_requests(req_path)
    report = json.loads(report_path.read_text(encoding="utf-8")) if report_path else None
    meta: dict[str, Any] = {"imported_from": str(req_path.resolve()), "report": report}
    if isinstance(report, dict):
        pipeline = pipeline or report.get("model") or report.get("pipeline")
        device = device or report.get("device") or report.get("host")
    prov = provenance(device=device, virtual=virtual, source="imported")
    prov["imported"] = {"requests_sha256": _sha256(req_path),
                        "report_sha256": _sha256(report_path) if report_path else None}
    with session_scope(engine) as s:
        run = create_run(s, pipeline=pipeline, device_name=device, kind="imported", state="running",
                         virtual=bool(virtual), provenance=prov, meta=meta)
        rid = run.id
    reqs, samples = [], []
    for rec in records:
        rq, sub = str(rec["request_id"]), float(rec["submitted_unix"])
        fin = rec.get("finished_unix")
        reqs.append({"run_id": rid, "request": rq, "phase": rec.get("phase") or "measured",
                     "band": rec.get("length_band"), "submitted": sub,
                     "finished": float(fin) if fin is not None else None,
                     "ok": rec.get("error") in (None, "") if "error" in rec else (fin is not None),
                     "error": rec.get("error") or None, "metrics": None})
        default_sr = rec.get("sr") or 24000
        for i, ch in enumerate(rec["chunks_all"]):
            t_ms = float(ch["t_ms"])
            samples.append((rid, rq, "audio", ch.get("idx", i), sub + t_ms / 1000.0, t_ms, int(ch.get("samples") or 0),
                            int(ch.get("sr") or default_sr), ch.get("sha256"), bool(ch.get("terminal", False)),
                            None, None, None, None, None))
    with engine.begin() as conn:
        conn.execute(insert(RunRequest.__table__), reqs)
        if samples:
            conn.exec_driver_sql(_sample_sql(conn.dialect.paramstyle), samples)
    final = finalize(engine, rid)
    _store_request_metrics(engine, rid)
    with session_scope(engine) as s:
        run = get_run(s, rid)
        put_summary(s, rid, "final", final, run.provenance)
        run.state = "finished"
        s.add(run)
    return rid


def import_tree(engine: Engine, path: str | Path, **kwargs: Any) -> list[str]:
    """Import ``path`` (a requests.jsonl or a directory holding one) or, for a directory of study
    runs, every ``requests.jsonl`` below it, each as its own run; returns the run ids in path order."""
    root = Path(path)
    if root.is_dir() and not (root / "requests.jsonl").is_file():
        found = sorted(root.rglob("requests.jsonl"))
        if not found:
            raise ConfigError(f"no requests.jsonl under {root}", remedy="point at the study's results directory")
        return [import_study(engine, f, **kwargs) for f in found]
    return [import_study(engine, root, **kwargs)]


def _store_request_metrics(engine: Engine, run_id: str) -> None:
    """Per-request audio figures recomputed from each request's chunks."""
    from sqlmodel import select

    from edgelab.metrics.audio import Chunk, audio_metrics
    from edgelab.metrics.live import wall_ms
    from edgelab.store.runs import RunSample

    with session_scope(engine) as s:
        rows = s.exec(select(RunSample).where(RunSample.run_id == run_id, RunSample.kind == "audio")
                      .order_by(RunSample.id)).all()
        by_req: dict[str, list[Chunk]] = {}
        for r in rows:
            by_req.setdefault(r.request, []).append(Chunk(r.t_ms, r.n or 0, r.sample_rate or 24000))
        for rq in s.exec(select(RunRequest).where(RunRequest.run_id == run_id)).all():
            m = audio_metrics(by_req.get(rq.request, []), wall_ms(rq.submitted, rq.finished))
            rq.metrics = {"audio": m.as_dict(), "text": None, "codec": None}
            s.add(rq)


def run_record(session: Session, run: Run) -> dict[str, Any]:
    """A run as plain data (for ``runs show/export --json`` and reports)."""
    from edgelab.store.runs import get_summary, requests_of

    final = get_summary(session, run.id, "final")
    live = get_summary(session, run.id, "live")
    return {
        "id": run.id, "pipeline": run.pipeline, "device": run.device_name, "runtime": run.runtime,
        "strategy": run.strategy, "profile": run.profile, "kind": run.kind, "state": run.state,
        "virtual": run.virtual, "command": run.command, "error": run.error,
        "created_at": run.created_at, "started_at": run.started_at, "finished_at": run.finished_at,
        "provenance": run.provenance, "meta": run.meta,
        "summary": final.metrics if final else None,
        "live": live.metrics if live and not final else None,
        "requests": [{"request": r.request, "phase": r.phase, "band": r.band, "submitted": r.submitted,
                      "finished": r.finished, "ok": r.ok, "error": r.error, "metrics": r.metrics}
                     for r in requests_of(session, run.id)],
        "telemetry": telemetry_record(session, run),
    }


def telemetry_record(session: Session, run: Run, last: int = 20) -> dict[str, Any]:
    """The run's telemetry: how many samples, from which sampler, and the latest ``last`` of them."""
    from sqlalchemy import func
    from sqlmodel import select

    from edgelab.store.runs import TelemetrySample, telemetry_of

    count = session.exec(select(func.count()).select_from(TelemetrySample)
                         .where(TelemetrySample.run_id == run.id)).one()
    rows = telemetry_of(session, run_id=run.id, limit=last)
    return {"samples": int(count), "sampler": (run.meta or {}).get("telemetry"),
            "latest": [{"t": r.t, "source": r.source, "virtual": r.virtual, "cpu_pct": r.cpu_pct,
                        "mem_available_bytes": r.mem_available_bytes, "rss_bytes": r.rss_bytes,
                        "gpu_util_pct": r.gpu_util_pct, "throttled": r.throttled, "temps_c": r.temps_c,
                        "clocks_mhz": r.clocks_mhz, "power_w": r.power_w, "raw": r.raw} for r in rows]}
