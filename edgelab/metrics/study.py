"""The study's per-request records (``requests.jsonl`` + ``report.json``): validate, import, export.

An import is validated whole before anything is written: every line is parsed and checked
(types, finite numbers, non-negative and ordered times, unique request ids) and every bad line is
reported as ``file:line: reason``. Only a fully valid input is written, and then in one
transaction: the run, its requests, raw chunks and summaries appear together or not at all.

The input's content hash (SHA-256 of ``requests.jsonl``, and of ``report.json`` when present) is
kept in the run's provenance with a hash of the records themselves (the rows they become), so
the same input imported twice, even re-formatted or exported from a run, is refused, naming the
run that holds it. ``export_study`` writes a run back in this format; importing that gives the same figures.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)
from sqlalchemy import Engine, insert
from sqlmodel import Session, select

from edgelab.errors import AlreadyImported, ConfigError, InvalidInput
from edgelab.strictjson import loads_strict

MAX_INPUT_BYTES = 1 << 30  # a requests.jsonl over 1 GiB is not a study run
MAX_LINE_BYTES = 64 << 20
MAX_REPORTED = 50  # bad lines listed one by one; the rest are counted

# JSON numbers only (no strings, no booleans), finite, never negative.
Time = Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)]
Count = Annotated[StrictInt, Field(ge=0)]
Rate = Annotated[StrictInt, Field(gt=0, le=10_000_000)]
Sha = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]
Name = Annotated[StrictStr, Field(min_length=1, max_length=128)]
Word = Annotated[StrictStr, Field(max_length=16)]


class StudyChunk(BaseModel):
    """One audio chunk as the study recorded it: arrival ``t_ms`` after the request was sent."""

    model_config = ConfigDict(extra="allow")

    idx: Count | None = None
    t_ms: Time
    samples: Count | None = 0
    sr: Rate | None = None
    terminal: StrictBool = False
    sha256: Sha | None = None


class StudyRecord(BaseModel):
    """One request of ``requests.jsonl`` (unknown keys are kept by the study and ignored here)."""

    model_config = ConfigDict(extra="allow")

    request_id: Name | StrictInt
    phase: Word | None = None
    length_band: Word | None = None
    submitted_unix: Time
    finished_unix: Time | None = None
    sr: Rate | None = None
    error: StrictStr | None = None
    chunks_all: list[StudyChunk]

    @model_validator(mode="after")
    def _ordered(self) -> StudyRecord:
        if self.finished_unix is not None and self.finished_unix < self.submitted_unix:
            raise ValueError(
                f"finished_unix {self.finished_unix} is before submitted_unix {self.submitted_unix}"
            )
        last = -1.0
        seen: set[int] = set()
        for i, ch in enumerate(self.chunks_all):
            if ch.t_ms < last:
                raise ValueError(f"chunks_all[{i}].t_ms {ch.t_ms} is before the chunk before it ({last})")
            last = ch.t_ms
            idx = ch.idx if ch.idx is not None else i
            if idx in seen:
                raise ValueError(f"chunks_all[{i}]: chunk idx {idx} appears twice")
            seen.add(idx)
        return self


@dataclass
class StudyInput:
    """A validated study run, ready to write."""

    requests_path: Path
    report_path: Path | None
    records: list[StudyRecord]
    report: dict[str, Any] | None
    requests_sha256: str
    report_sha256: str | None


def _reason(err: ValidationError) -> str:
    parts = []
    for e in err.errors(include_url=False)[:3]:
        loc = ".".join(str(x) for x in e["loc"] if not (isinstance(x, str) and x in ("function-after",)))
        val = e.get("input")
        shown = repr(val) if not isinstance(val, dict | list) else type(val).__name__
        parts.append(f"{loc + ': ' if loc else ''}{e['msg']}" + (f" (got {shown[:40]})" if loc else ""))
    more = len(err.errors()) - 3
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _read_text(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_INPUT_BYTES:
            raise InvalidInput([f"{path}: {size} bytes is larger than the {MAX_INPUT_BYTES >> 20} MiB limit"])
        data = path.read_bytes()
    except OSError as err:
        raise ConfigError(
            f"{path}: cannot read ({err.strerror or err})", remedy="check the path and its permissions"
        ) from None
    if b"\0" in data:
        line = data[: data.index(b"\0")].count(b"\n") + 1
        raise InvalidInput([f"{path}:{line}: binary data (a NUL byte), not JSON lines"])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise InvalidInput(
            [f"{path}:{line}: not UTF-8 text (byte 0x{data[err.start]:02x} at offset {err.start})"]
        ) from None


def read_records(path: Path) -> list[StudyRecord]:
    """Every record of ``requests.jsonl``, validated; InvalidInput lists every bad line."""
    problems: list[str] = []
    records: list[StudyRecord] = []
    first_line: dict[str, int] = {}
    for lineno, line in enumerate(_read_text(path).splitlines(), 1):
        if not line.strip():
            continue
        if len(line) > MAX_LINE_BYTES:
            problems.append(f"{path}:{lineno}: line longer than {MAX_LINE_BYTES >> 20} MiB")
            continue
        try:
            raw = loads_strict(line)
        except ValueError as err:
            problems.append(f"{path}:{lineno}: not JSON ({getattr(err, 'msg', None) or err})")
            continue
        except RecursionError:
            problems.append(f"{path}:{lineno}: not JSON (nested too deeply)")
            continue
        if not isinstance(raw, dict):
            problems.append(f"{path}:{lineno}: a record must be a JSON object, not {type(raw).__name__}")
            continue
        missing = [k for k in ("request_id", "submitted_unix", "chunks_all") if k not in raw]
        if missing:
            problems.append(f"{path}:{lineno}: record lacks {', '.join(missing)}")
            continue
        try:
            rec = StudyRecord.model_validate(raw)
        except ValidationError as err:
            problems.append(f"{path}:{lineno}: {_reason(err)}")
            continue
        rid = str(rec.request_id)
        if rid in first_line:
            problems.append(f"{path}:{lineno}: request_id {rid!r} already used on line {first_line[rid]}")
            continue
        first_line[rid] = lineno
        records.append(rec)
    if problems:
        raise InvalidInput(problems)
    if not records:
        raise InvalidInput(
            [f"{path}: holds no records"], remedy="import a requests.jsonl with at least one request"
        )
    return records


def read_report(path: Path) -> dict[str, Any]:
    text = _read_text(path)
    try:
        data = loads_strict(text)
    except ValueError as err:
        line = getattr(err, "lineno", 1)
        raise InvalidInput([f"{path}:{line}: not JSON ({getattr(err, 'msg', None) or err})"]) from None
    except RecursionError:
        raise InvalidInput([f"{path}:1: not JSON (nested too deeply)"]) from None
    if not isinstance(data, dict):
        raise InvalidInput([f"{path}:1: report.json must be a JSON object, not {type(data).__name__}"])
    return data


def find_files(path: Path) -> tuple[Path, Path | None]:
    if path.is_dir():
        req = path / "requests.jsonl"
        if not req.is_file():
            raise ConfigError(
                f"{path} holds no requests.jsonl", remedy="point at the study's run directory or file"
            )
    elif path.is_file():
        req = path
    else:
        raise ConfigError(
            f"{path} does not exist", remedy="give the path of a requests.jsonl or its directory"
        )
    report = req.parent / "report.json"
    return req, report if report.is_file() else None


def load_input(path: Path) -> StudyInput:
    """Read and validate one study run (both files) without writing anything."""
    req_path, report_path = find_files(Path(path))
    problems: list[str] = []
    records: list[StudyRecord] = []
    report = None
    try:
        records = read_records(req_path)
    except InvalidInput as err:
        problems += err.problems
    if report_path is not None:
        try:
            report = read_report(report_path)
        except InvalidInput as err:
            problems += err.problems
    if problems:
        raise InvalidInput(problems)
    return StudyInput(
        req_path,
        report_path,
        records,
        report,
        hashlib.sha256(req_path.read_bytes()).hexdigest(),
        hashlib.sha256(report_path.read_bytes()).hexdigest() if report_path else None,
    )


def records_sha256(inp: StudyInput) -> str:
    """The measurement's own hash: the rows it becomes (requests and chunks), not the file's bytes,
    so a re-formatted or exported copy of the same records is the same input."""
    reqs, samples = _rows(inp, "")
    canon = [
        [{k: v for k, v in r.items() if k not in ("run_id", "metrics")} for r in reqs],
        [x[1:] for x in samples],
    ]
    return hashlib.sha256(json.dumps(canon, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def find_imported(session: Session, inp: StudyInput) -> str | None:
    """The imported run that already holds this input (same file bytes or same records), if any."""
    from edgelab.store.runs import Run

    mine = records_sha256(inp)
    for rid, prov in session.exec(select(Run.id, Run.provenance).where(Run.kind == "imported")).all():
        seen = (prov or {}).get("imported") or {}
        if seen.get("requests_sha256") == inp.requests_sha256 or seen.get("records_sha256") == mine:
            return rid
    return None


def _rows(inp: StudyInput, rid: str) -> tuple[list[dict[str, Any]], list[tuple]]:
    reqs, samples = [], []
    for rec in inp.records:
        rq, sub, fin = str(rec.request_id), float(rec.submitted_unix), rec.finished_unix
        has_error = "error" in (rec.model_fields_set or set())
        reqs.append(
            {
                "run_id": rid,
                "request": rq,
                "phase": rec.phase or "measured",
                "band": rec.length_band,
                "submitted": sub,
                "finished": float(fin) if fin is not None else None,
                "ok": rec.error in (None, "") if has_error else (fin is not None),
                "error": rec.error or None,
                "metrics": None,
            }
        )
        default_sr = rec.sr or 24000
        for i, ch in enumerate(rec.chunks_all):
            t_ms = float(ch.t_ms)
            samples.append(
                (
                    rid,
                    rq,
                    "audio",
                    ch.idx if ch.idx is not None else i,
                    sub + t_ms / 1000.0,
                    t_ms,
                    int(ch.samples or 0),
                    int(ch.sr or default_sr),
                    ch.sha256,
                    bool(ch.terminal),
                    None,
                    None,
                    None,
                    None,
                    None,
                )
            )
    return reqs, samples


def write_inputs(
    engine: Engine,
    inputs: Iterable[StudyInput],
    *,
    device: str | None,
    pipeline: str | None,
    virtual: bool | None,
) -> list[str]:
    """Write validated inputs, all of them in one transaction; returns the new run ids."""
    from edgelab.metrics.audio import Chunk, audio_metrics
    from edgelab.metrics.ingest import SampleRow, _sample_sql
    from edgelab.metrics.live import recompute, wall_ms
    from edgelab.metrics.provenance import run_provenance
    from edgelab.store.db import session_scope
    from edgelab.store.runs import RunRequest, create_run, put_summary

    inputs = list(inputs)
    ids = []
    with session_scope(engine) as s:
        for inp in inputs:
            holder = find_imported(s, inp)
            if holder is not None:
                raise AlreadyImported(
                    f"{inp.requests_path} is already imported as run {holder} "
                    "(the same records: same content hash)",
                    remedy=f"see it with `edgelab runs show {holder}`; `edgelab runs rm {holder}` "
                    "first to import it again",
                )
            dev, pipe = device, pipeline
            if inp.report is not None:
                pipe = pipe or _text(inp.report.get("model")) or _text(inp.report.get("pipeline"))
                dev = dev or _text(inp.report.get("device")) or _text(inp.report.get("host"))
            report = inp.report or {}
            prov = run_provenance(
                None,  # the study's machine is not in the inventory: what its report says, else unknown
                source="imported",
                device=dev,
                virtual=virtual,
                runtime=_text(report.get("runtime")) or _text(report.get("backend")),
                strategy=_text(report.get("strategy")),
                command=_text(report.get("command")),
                weights=_text(report.get("weights")),
                imported={
                    "requests_sha256": inp.requests_sha256,
                    "report_sha256": inp.report_sha256,
                    "records_sha256": records_sha256(inp),
                },
            )
            meta = {"imported_from": str(inp.requests_path.resolve()), "report": inp.report}
            run = create_run(
                s,
                pipeline=pipe,
                device_name=dev,
                kind="imported",
                state="running",
                virtual=bool(virtual),
                provenance=prov,
                meta=meta,
            )
            reqs, samples = _rows(inp, run.id)
            conn = s.connection()
            conn.execute(insert(RunRequest.__table__), reqs)
            if samples:
                conn.exec_driver_sql(_sample_sql(conn.dialect.paramstyle), samples)
            # figures from the very rows just written (what finalize() would read back)
            rows = [SampleRow._make(x) for x in samples]
            req_objs = [SimpleNamespace(**r) for r in reqs]
            final = recompute(req_objs, rows, None, errors={}, stages=[], telemetry=[])
            by_req: dict[str, list[Chunk]] = {}
            for x in rows:
                by_req.setdefault(x.request, []).append(Chunk(x.t_ms, x.n or 0, x.sample_rate or 24000))
            for rq in s.exec(select(RunRequest).where(RunRequest.run_id == run.id)).all():
                m = audio_metrics(by_req.get(rq.request, []), wall_ms(rq.submitted, rq.finished))
                rq.metrics = {"audio": m.as_dict(), "text": None, "codec": None}
                s.add(rq)
            put_summary(s, run.id, "final", json.loads(json.dumps(final)), run.provenance)
            run.state = "finished"
            s.add(run)
            s.flush()
            ids.append(run.id)
    return ids


def _text(v: Any) -> str | None:
    return v if isinstance(v, str) and v else None


def import_paths(
    engine: Engine,
    path: str | Path,
    *,
    device: str | None = None,
    pipeline: str | None = None,
    virtual: bool | None = None,
) -> list[str]:
    """Import ``path`` (a requests.jsonl, its directory, or a tree of study runs): validate every
    input first, then write all runs in one transaction; returns the run ids in path order."""
    root = Path(path)
    if root.is_dir() and not (root / "requests.jsonl").is_file():
        found = sorted(root.rglob("requests.jsonl"))
        if not found:
            raise ConfigError(
                f"no requests.jsonl under {root}", remedy="point at the study's results directory"
            )
    else:
        found = [root]
    problems: list[str] = []
    inputs: list[StudyInput] = []
    hashes: dict[str, Path] = {}
    for f in found:
        try:
            inp = load_input(f)
        except InvalidInput as err:
            problems += err.problems
            continue
        key = records_sha256(inp)
        if key in hashes:
            problems.append(f"{inp.requests_path}: the same records as {hashes[key]}")
            continue
        hashes[key] = inp.requests_path
        inputs.append(inp)
    if problems:
        raise InvalidInput(problems)
    return write_inputs(engine, inputs, device=device, pipeline=pipeline, virtual=virtual)


# --- export -----------------------------------------------------------------------------------


def study_records(session: Session, run_id: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A stored run as the study's records (one per request, audio chunks with their ``t_ms``) and
    its report; refuses a run whose figures the format cannot carry (non-audio samples)."""
    from edgelab.store.runs import RunSample, get_run, requests_of

    run = get_run(session, run_id)
    kinds = set(session.exec(select(RunSample.kind).where(RunSample.run_id == run.id).distinct()).all())
    if kinds - {"audio"}:
        raise ConfigError(
            f"run {run.id} holds {', '.join(sorted(kinds - {'audio'}))} samples; the study format "
            "carries audio chunks only",
            remedy=f"use `edgelab runs export {run.id} --json` instead",
        )
    chunks: dict[str, list[RunSample]] = {}
    for x in session.exec(select(RunSample).where(RunSample.run_id == run.id).order_by(RunSample.id)).all():
        chunks.setdefault(x.request, []).append(x)
    out = []
    for r in requests_of(session, run.id):
        rec: dict[str, Any] = {
            "request_id": r.request,
            "phase": r.phase,
            "length_band": r.band,
            "submitted_unix": r.submitted,
            "finished_unix": r.finished,
        }
        if r.error:
            rec["error"] = r.error
        elif r.ok is False and r.finished is not None:
            rec["error"] = "failed"
        elif r.ok is True and r.finished is None:
            rec["error"] = ""  # ok without a finish time: the import reads "no error" as ok
        rec["chunks_all"] = [
            {
                "idx": c.idx,
                "t_ms": c.t_ms if c.t_ms is not None else (c.t - r.submitted) * 1000.0,
                "samples": c.n or 0,
                "sr": c.sample_rate or 24000,
                "terminal": bool(c.terminal),
                "sha256": c.sha256,
            }
            for c in chunks.get(r.request, [])
        ]
        out.append(rec)
    if not out:
        raise ConfigError(
            f"run {run.id} has no requests to export", remedy="export a run that measured something"
        )
    report = dict(run.meta.get("report") or {}) if isinstance(run.meta.get("report"), dict) else {}
    report.setdefault("pipeline", run.pipeline)
    report.setdefault("device", run.device_name)
    report["exported_from"] = {"run": run.id, "kind": run.kind, "virtual": run.virtual}
    return out, report


def export_study(session: Session, run_id: str, out_dir: Path) -> Path:
    """Write ``out_dir/requests.jsonl`` and ``report.json`` (what ``runs import`` reads back)."""
    records, report = study_records(session, run_id)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    req = out_dir / "requests.jsonl"
    if req.exists():
        raise ConfigError(f"{req} already exists", remedy="export into an empty directory")
    tmp = out_dir / ".requests.jsonl.part"
    tmp.write_text("".join(json.dumps(r, allow_nan=False) + "\n" for r in records), encoding="utf-8")
    (out_dir / "report.json").write_text(
        json.dumps(report, indent=2, default=str, allow_nan=False) + "\n", encoding="utf-8"
    )
    tmp.replace(req)
    return req
