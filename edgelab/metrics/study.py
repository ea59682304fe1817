"""The study's per-request records (``requests.jsonl`` + ``report.json``): validate, import, export.

An import streams: memory holds one record at a time (and the request ids seen), never the file,
so a 50 MB study file imports in a small, fixed amount of memory. It reads each input twice:

1. validate every line (types, finite numbers in range, non-negative and ordered times, unique
   request ids), each bad line reported as ``file:line: reason`` (the first ``MAX_REPORTED``, then
   a count); nothing is written unless every line of every input is valid;
2. write, in one transaction for all inputs: each record's request row (its figures computed from
   its own chunks), its raw chunks in batches, and at the end the run's final summary (from the
   per-request figures, as the batch recompute gives them). The run, its requests, raw chunks and
   summaries appear together or not at all.

Numbers a database cannot hold, or that no measurement gives, are refused on their line (exit 2):
an integer above 2^31 - 1 (``idx``, ``samples``), a time before 1970 or after 2100, a chunk more
than a day after its request was sent, NaN or Infinity.

The input's content hash (SHA-256 of ``requests.jsonl``, and of ``report.json`` when present) is
kept in the run's provenance with a hash of the records themselves (the rows they become), so
the same input imported twice, even re-formatted or exported from a run, is refused, naming the
run that holds it. ``export_study`` writes a run back in this format; importing that gives the same figures.
"""

from __future__ import annotations

import hashlib
import json
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
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

from edgelab.errors import MAX_REPORTED, AlreadyImported, ConfigError, InvalidInput
from edgelab.states import RunState
from edgelab.strictjson import loads_strict

MAX_INPUT_BYTES = 1 << 30  # a requests.jsonl over 1 GiB is not a study run
MAX_LINE_BYTES = 64 << 20
MAX_DB_INT = 2**31 - 1  # the largest integer every supported database's INTEGER column holds
LAST_UNIX = 4_102_444_800.0  # 2100-01-01: a later time stamp is no measurement
MAX_CHUNK_MS = 86_400_000.0  # a chunk a day after its request was sent is no measurement either
WRITE_BATCH = 5000  # sample rows per INSERT
_READ = 1 << 20

# JSON numbers only (no strings, no booleans), finite, never negative, within what is stored.
Time = Annotated[float, Field(strict=True, ge=0, le=LAST_UNIX, allow_inf_nan=False)]
ChunkMs = Annotated[float, Field(strict=True, ge=0, le=MAX_CHUNK_MS, allow_inf_nan=False)]
Count = Annotated[StrictInt, Field(ge=0, le=MAX_DB_INT)]
Rate = Annotated[StrictInt, Field(gt=0, le=10_000_000)]
Sha = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]
Name = Annotated[StrictStr, Field(min_length=1, max_length=128)]
Word = Annotated[StrictStr, Field(max_length=16)]


class StudyChunk(BaseModel):
    """One audio chunk as the study recorded it: arrival ``t_ms`` after the request was sent."""

    model_config = ConfigDict(extra="allow")

    idx: Count | None = None
    t_ms: ChunkMs
    samples: Count | None = 0
    sr: Rate | None = None
    terminal: StrictBool = False
    sha256: Sha | None = None


class StudyRecord(BaseModel):
    """One request of ``requests.jsonl`` (unknown keys are kept by the study and ignored here)."""

    model_config = ConfigDict(extra="allow")

    request_id: Name | StrictInt  # kept as text: any integer is fine
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


class Problems:
    """Bad lines of an input: the first ``MAX_REPORTED`` kept word for word, the rest counted."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.more = 0

    def add(self, line: str) -> None:
        if len(self.lines) < MAX_REPORTED:
            self.lines.append(line)
        else:
            self.more += 1

    def extend(self, other: Problems) -> None:
        for line in other.lines:
            self.add(line)
        self.more += other.more

    def __bool__(self) -> bool:
        return bool(self.lines or self.more)

    def error(self, remedy: str | None = None) -> InvalidInput:
        return InvalidInput(self.lines, more=self.more, remedy=remedy)


@dataclass
class StudyInput:
    """A validated study run, ready to write: its files, hashes and how many records (not them)."""

    requests_path: Path
    report_path: Path | None
    report: dict[str, Any] | None
    requests_sha256: str
    report_sha256: str | None
    records: int = 0
    # the records hash's first half (the request rows), continued by the write over the chunks
    _rows_hash: Any = field(default=None, repr=False)


def _reason(err: ValidationError) -> str:
    parts = []
    for e in err.errors(include_url=False)[:3]:
        loc = ".".join(str(x) for x in e["loc"] if not (isinstance(x, str) and x in ("function-after",)))
        val = e.get("input")
        shown = repr(val) if not isinstance(val, dict | list) else type(val).__name__
        parts.append(f"{loc + ': ' if loc else ''}{e['msg']}" + (f" (got {shown[:40]})" if loc else ""))
    more = len(err.errors()) - 3
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _open(path: Path):
    try:
        size = path.stat().st_size
        if size > MAX_INPUT_BYTES:
            raise InvalidInput([f"{path}: {size} bytes is larger than the {MAX_INPUT_BYTES >> 20} MiB limit"])
        return path.open("rb")
    except OSError as err:
        raise ConfigError(
            f"{path}: cannot read ({err.strerror or err})", remedy="check the path and its permissions"
        ) from None


def _lines(path: Path, problems: Problems, digest: Any = None) -> Iterator[tuple[int, str]]:
    """(line number, text) of each non-blank line, read a MiB at a time; a line that is binary,
    not UTF-8 or longer than MAX_LINE_BYTES is a problem (and skipped, unread past the limit).
    ``digest`` (a hashlib object) sees every byte of the file."""
    with _open(path) as f:
        lineno, offset = 0, 0
        while True:
            raw = f.readline(MAX_LINE_BYTES + 1)
            if not raw:
                return
            lineno += 1
            if digest is not None:
                digest.update(raw)
            start, offset = offset, offset + len(raw)
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                problems.add(f"{path}:{lineno}: line longer than {MAX_LINE_BYTES >> 20} MiB")
                while (rest := f.readline(_READ)) and not rest.endswith(b"\n"):  # skip the rest of it
                    offset += len(rest)
                    if digest is not None:
                        digest.update(rest)
                offset += len(rest)
                if digest is not None and rest:
                    digest.update(rest)
                continue
            if b"\0" in raw:
                problems.add(f"{path}:{lineno}: binary data (a NUL byte), not JSON lines")
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                problems.add(
                    f"{path}:{lineno}: not UTF-8 text (byte 0x{raw[err.start]:02x} at offset {start + err.start})"
                )
                continue
            raw = b""  # a long line is not held twice while it is parsed
            if text.strip():
                yield lineno, text


def _record(path: Path, lineno: int, line: str, problems: Problems) -> StudyRecord | None:
    """One line as a validated record, or None with its problem noted."""
    try:
        raw = loads_strict(line)
    except ValueError as err:
        problems.add(f"{path}:{lineno}: not JSON ({getattr(err, 'msg', None) or err})")
        return None
    except RecursionError:
        problems.add(f"{path}:{lineno}: not JSON (nested too deeply)")
        return None
    if not isinstance(raw, dict):
        problems.add(f"{path}:{lineno}: a record must be a JSON object, not {type(raw).__name__}")
        return None
    missing = [k for k in ("request_id", "submitted_unix", "chunks_all") if k not in raw]
    if missing:
        problems.add(f"{path}:{lineno}: record lacks {', '.join(missing)}")
        return None
    try:
        return StudyRecord.model_validate(raw)
    except ValidationError as err:
        problems.add(f"{path}:{lineno}: {_reason(err)}")
        return None


def _records(path: Path, problems: Problems, digest: Any = None) -> Iterator[tuple[int, StudyRecord]]:
    """Every valid record of ``requests.jsonl`` with its line, one at a time (problems noted)."""
    for lineno, line in _lines(path, problems, digest):
        rec = _record(path, lineno, line, problems)
        if rec is not None:
            yield lineno, rec


def read_records(path: Path) -> list[StudyRecord]:
    """Every record of ``requests.jsonl``, validated, as a list (small inputs; the import streams);
    InvalidInput lists every bad line."""
    problems = Problems()
    records: list[StudyRecord] = []
    first_line: dict[str, int] = {}
    for lineno, rec in _records(Path(path), problems):
        rid = str(rec.request_id)
        if rid in first_line:
            problems.add(f"{path}:{lineno}: request_id {rid!r} already used on line {first_line[rid]}")
            continue
        first_line[rid] = lineno
        records.append(rec)
    if problems:
        raise problems.error()
    if not records:
        raise InvalidInput(
            [f"{path}: holds no records"], remedy="import a requests.jsonl with at least one request"
        )
    return records


def read_report(path: Path) -> dict[str, Any]:
    size = path.stat().st_size if path.exists() else 0
    if size > MAX_LINE_BYTES:
        raise InvalidInput([f"{path}: {size} bytes is larger than the {MAX_LINE_BYTES >> 20} MiB limit"])
    with _open(path) as f:
        data_b = f.read()
    if b"\0" in data_b:
        line = data_b[: data_b.index(b"\0")].count(b"\n") + 1
        raise InvalidInput([f"{path}:{line}: binary data (a NUL byte), not JSON lines"])
    try:
        text = data_b.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data_b[: err.start].count(b"\n") + 1
        raise InvalidInput(
            [f"{path}:{line}: not UTF-8 text (byte 0x{data_b[err.start]:02x} at offset {err.start})"]
        ) from None
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


def _canon(obj: Any) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def _request_row(rec: StudyRecord, rid: str) -> dict[str, Any]:
    sub, fin = float(rec.submitted_unix), rec.finished_unix
    has_error = "error" in (rec.model_fields_set or set())
    return {
        "run_id": rid,
        "request": str(rec.request_id),
        "phase": rec.phase or "measured",
        "band": rec.length_band,
        "submitted": sub,
        "finished": float(fin) if fin is not None else None,
        "ok": rec.error in (None, "") if has_error else (fin is not None),
        "error": rec.error or None,
        "metrics": None,
    }


def _sample_rows(rec: StudyRecord, rid: str) -> list[tuple]:
    rq, sub = str(rec.request_id), float(rec.submitted_unix)
    default_sr = rec.sr or 24000
    out = []
    for i, ch in enumerate(rec.chunks_all):
        t_ms = float(ch.t_ms)
        out.append(
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
    return out


def _request_part(row: dict[str, Any]) -> bytes:
    """A request row as the records hash sees it (everything but the run id and the figures)."""
    return _canon({k: v for k, v in row.items() if k not in ("run_id", "metrics")})


def scan(path: Path, problems: Problems) -> StudyInput | None:
    """Pass 1 over one study run (both files): validate every line, hash the file and the request
    rows; nothing kept but the hashes and the request ids. None when a problem was noted."""
    req_path, report_path = find_files(Path(path))
    mine = Problems()
    file_hash = hashlib.sha256()
    rows_hash = hashlib.sha256(b"[[")
    first_line: dict[str, int] = {}
    n = 0
    for lineno, rec in _records(req_path, mine, file_hash):
        rid = str(rec.request_id)
        if rid in first_line:
            mine.add(f"{req_path}:{lineno}: request_id {rid!r} already used on line {first_line[rid]}")
            continue
        first_line[rid] = lineno
        rows_hash.update((b"," if n else b"") + _request_part(_request_row(rec, "")))
        n += 1
    report = None
    if report_path is not None:
        try:
            report = read_report(report_path)
        except InvalidInput as err:
            for line in err.problems:
                mine.add(line)
    if not mine and n == 0:
        mine.add(f"{req_path}: holds no records")
    if mine:
        problems.extend(mine)
        return None
    return StudyInput(
        req_path,
        report_path,
        report,
        file_hash.hexdigest(),
        hashlib.sha256(report_path.read_bytes()).hexdigest() if report_path else None,
        n,
        rows_hash,
    )


def load_input(path: Path) -> StudyInput:
    """Read and validate one study run (both files) without writing anything."""
    problems = Problems()
    inp = scan(Path(path), problems)
    if inp is None:
        raise problems.error(
            "import a requests.jsonl with at least one request"
            if problems.lines and problems.lines[0].endswith("holds no records")
            else None
        )
    return inp


def _valid_records(inp: StudyInput) -> Iterator[StudyRecord]:
    """Pass 2's records: the file read again (it was validated whole; it must not have changed)."""
    problems = Problems()
    seen = 0
    for _lineno, rec in _records(inp.requests_path, problems):
        seen += 1
        yield rec
    if problems or seen < inp.records:
        raise ConfigError(
            f"{inp.requests_path} changed while it was imported",
            remedy="import it again once nothing writes to it; nothing was imported",
        )


def records_sha256(inp: StudyInput) -> str:
    """The measurement's own hash: the rows it becomes (requests and chunks), not the file's bytes,
    so a re-formatted or exported copy of the same records is the same input (reads the file again)."""
    h = inp._rows_hash.copy()
    h.update(b"],[")
    first = True
    for rec in _valid_records(inp):
        for x in _sample_rows(rec, ""):
            h.update((b"" if first else b",") + _canon(list(x[1:])))
            first = False
    h.update(b"]]")
    return h.hexdigest()


def find_imported(session: Session, inp: StudyInput, records_hash: str | None = None) -> str | None:
    """The imported run that already holds this input (same file bytes or same records), if any."""
    from edgelab.store.runs import Run

    mine = records_hash or records_sha256(inp)
    for rid, prov in session.exec(select(Run.id, Run.provenance).where(Run.kind == "imported")).all():
        seen = (prov or {}).get("imported") or {}
        if seen.get("requests_sha256") == inp.requests_sha256 or seen.get("records_sha256") == mine:
            return rid
    return None


def _already(inp: StudyInput, holder: str) -> AlreadyImported:
    return AlreadyImported(
        f"{inp.requests_path} is already imported as run {holder} (the same records: same content hash)",
        remedy=f"see it with `edgelab runs show {holder}`; `edgelab runs rm {holder}` first to import it again",
    )


def _write_one(s: Session, inp: StudyInput, run_id: str) -> tuple[str, list[Any]]:
    """Pass 2 for one input: request rows with their figures, chunks in batches; returns the
    records hash and the per-request views the run's final summary is made of."""
    from edgelab.metrics.audio import Chunk, audio_metrics
    from edgelab.metrics.ingest import _sample_sql
    from edgelab.metrics.live import RequestView, codec_metrics, wall_ms
    from edgelab.store.runs import RunRequest

    conn = s.connection()
    sql = _sample_sql(conn.dialect.paramstyle)
    h = inp._rows_hash.copy()
    h.update(b"],[")
    first = True
    batch: list[tuple] = []
    views: list[Any] = []
    for rec in _valid_records(inp):
        row = _request_row(rec, run_id)
        samples = _sample_rows(rec, run_id)
        del rec
        m = audio_metrics(
            [Chunk(x[5], x[6] or 0, x[7] or 24000) for x in samples],
            wall_ms(row["submitted"], row["finished"]),
        )
        row["metrics"] = {"audio": m.as_dict(), "text": None, "codec": None}
        conn.execute(insert(RunRequest.__table__), [row])
        m.chunk_gaps_ms = array("d", m.chunk_gaps_ms)  # type: ignore[assignment]  # 8 bytes a gap
        views.append(
            RequestView(row["request"], row["phase"], row["band"], row["ok"], m, None, codec_metrics([]))
        )
        for x in samples:
            h.update((b"" if first else b",") + _canon(list(x[1:])))
            first = False
        batch += samples
        if len(batch) >= WRITE_BATCH:
            conn.exec_driver_sql(sql, batch)
            batch = []
    if batch:
        conn.exec_driver_sql(sql, batch)
    h.update(b"]]")
    return h.hexdigest(), views


def write_inputs(
    engine: Engine,
    inputs: Iterable[StudyInput],
    *,
    device: str | None,
    pipeline: str | None,
    virtual: bool | None,
) -> list[str]:
    """Write validated inputs, all of them in one transaction; returns the new run ids. An input
    whose records another input of this import, or a stored run, already holds undoes them all."""
    from edgelab.metrics.live import ResourceAgg, run_summary
    from edgelab.metrics.provenance import run_provenance
    from edgelab.store.db import session_scope
    from edgelab.store.runs import create_run, put_summary

    ids = []
    seen: dict[str, Path] = {}
    with session_scope(engine) as s:
        for inp in inputs:
            holder = _holder_by_file(s, inp)
            if holder is not None:
                raise _already(inp, holder)
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
            )  # its "imported" hashes once the records are written (the records hash is made then)
            meta = {"imported_from": str(inp.requests_path.resolve()), "report": inp.report}
            run = create_run(
                s,
                pipeline=pipe,
                device_name=dev,
                kind="imported",
                state=RunState.RUNNING,
                virtual=bool(virtual),
                provenance=prov,
                meta=meta,
            )
            s.flush()
            records_hash, views = _write_one(s, inp, run.id)
            if records_hash in seen:
                raise InvalidInput([f"{inp.requests_path}: the same records as {seen[records_hash]}"])
            seen[records_hash] = inp.requests_path
            holder = find_imported(s, inp, records_hash)
            if holder is not None and holder != run.id:
                raise _already(inp, holder)
            imported = {
                "requests_sha256": inp.requests_sha256,
                "report_sha256": inp.report_sha256,
                "records_sha256": records_hash,
            }
            final = run_summary(views, [], None, {}, {}, ResourceAgg())
            del views
            run.provenance = {**prov, "imported": imported}  # a new dict: the JSON column sees the change
            put_summary(s, run.id, "final", json.loads(json.dumps(final)), run.provenance)
            run.state = RunState.FINISHED
            s.add(run)
            s.flush()
            ids.append(run.id)
    return ids


def _holder_by_file(session: Session, inp: StudyInput) -> str | None:
    """An imported run made from these very file bytes (checked before anything is written)."""
    from edgelab.store.runs import Run

    for rid, prov in session.exec(select(Run.id, Run.provenance).where(Run.kind == "imported")).all():
        if ((prov or {}).get("imported") or {}).get("requests_sha256") == inp.requests_sha256:
            return rid
    return None


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
    problems = Problems()
    inputs: list[StudyInput] = []
    for f in found:
        inp = scan(f, problems)
        if inp is not None:
            inputs.append(inp)
    if problems:
        raise problems.error(
            "import a requests.jsonl with at least one request"
            if len(found) == 1 and problems.lines and problems.lines[0].endswith("holds no records")
            else None
        )
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
