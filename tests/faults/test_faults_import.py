"""`runs import` faces garbage: every bad line named, exit 2, and not one row written.

Named variants (the fault experiments' 34 and more) and Hypothesis-generated mutations of a good
record; after each, the database holds exactly the runs it held before, and no output carries a
traceback. Also: the export -> import round trip gives the same figures, the same input twice is
refused naming the run, and `runs rm` removes a run with everything recorded for it.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select
from typer.testing import CliRunner

from edgelab.cli import app
from edgelab.metrics import events as ev
from edgelab.metrics.ingest import Ingestor
from edgelab.metrics.results import start_run, verify_recompute
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.runs import Run, RunLog, RunRequest, RunSample, RunSummary, get_summary

STUDY = Path(__file__).parents[1] / "fixtures" / "study_run"
runner = CliRunner()
GOOD = json.loads((STUDY / "requests.jsonl").read_text().splitlines()[1])  # short-0


def cli(db, *args):
    return runner.invoke(app, ["--db", str(db), *args])


def counts(engine) -> tuple[int, ...]:
    with engine.connect() as c:
        return tuple(
            c.execute(select(func.count()).select_from(t.__table__)).scalar_one()
            for t in (Run, RunRequest, RunSample, RunSummary, RunLog)
        )


def line(**over) -> str:
    rec = json.loads(json.dumps(GOOD))
    for k, v in over.items():
        if v is KeyError:
            rec.pop(k, None)
        else:
            rec[k] = v
    return json.dumps(rec)


def chunk_line(i: int, **over) -> str:
    rec = json.loads(json.dumps(GOOD))
    rec["chunks_all"][i].update(over)
    return json.dumps(rec)


OK2 = line(request_id="other")  # a good second line: a bad input is refused as a whole

VARIANTS: dict[str, bytes] = {
    "submitted yesterday": line(submitted_unix="yesterday"),
    "submitted as numeric string": line(submitted_unix="1750000010"),
    "submitted null": line(submitted_unix=None),
    "submitted bool": line(submitted_unix=True),
    "submitted negative": line(submitted_unix=-5),
    "submitted NaN": line().replace('"submitted_unix": 1750000010.0', '"submitted_unix": NaN'),
    "submitted Infinity": line().replace('"submitted_unix": 1750000010.0', '"submitted_unix": Infinity'),
    "finished -Infinity": line().replace('"finished_unix": 1750000013.2', '"finished_unix": -Infinity'),
    "finished before submitted": line(finished_unix=1749999999.0),
    "negative TTFA": chunk_line(0, t_ms=-500),
    "TTFA NaN": chunk_line(0).replace('"t_ms": 412.5', '"t_ms": NaN'),
    "TTFA huge float": chunk_line(0).replace('"t_ms": 412.5', '"t_ms": 1e400'),
    "TTFA string": chunk_line(0, t_ms="fast"),
    "chunks out of order": chunk_line(1, t_ms=100.0),
    "chunk idx twice": chunk_line(1, idx=0),
    "negative samples": chunk_line(0, samples=-1920),
    "fractional samples": chunk_line(0, samples=19.5),
    "zero sample rate": chunk_line(0, sr=0),
    "sha256 not hex": chunk_line(0, sha256="zz" * 32),
    "terminal as string": chunk_line(0, terminal="yes"),
    "chunks_all object": line(chunks_all={"t_ms": 1}),
    "chunks_all of numbers": line(chunks_all=[1, 2, 3]),
    "missing request_id": line(request_id=KeyError),
    "missing chunks_all": line(chunks_all=KeyError),
    "empty request_id": line(request_id=""),
    "request_id list": line(request_id=["a"]),
    "phase number": line(phase=3),
    "record is a list": json.dumps([GOOD]),
    "record is a number": "42",
    "truncated JSON": line()[: len(line()) // 2],
    "trailing garbage": line() + " }",
    "deeply nested": '{"request_id": "x", "submitted_unix": 1, "chunks_all": '
    + "[" * 5000
    + "]" * 5000
    + "}",
    "duplicated ids": line() + "\n" + line(),
    "error as number": line(error=500),
    # numbers a database cannot hold, or no measurement gives: refused on their line (issue 27)
    "samples 10**30": chunk_line(0, samples=10**30),
    "idx 2**63": chunk_line(0, idx=2**63),
    "idx 2**31": chunk_line(0, idx=2**31),
    "TTFA 1e308 ms": chunk_line(0).replace('"t_ms": 412.5', '"t_ms": 1e308'),
    "chunk two days late": chunk_line(2, t_ms=2 * 86_400_000.0),
    "submitted in the year 3000": line(submitted_unix=32_503_680_000.0),
    "finished 1e300": line(finished_unix=1e300),
    "sample rate 2**40": chunk_line(0, sr=2**40),
}
VARIANTS = {k: (v + "\n" + OK2 + "\n").encode() for k, v in VARIANTS.items()}
VARIANTS |= {
    "binary": b"\x00\x01\x02garbage\xff\xfe" * 100,
    "non-UTF-8 latin-1": (line().replace('"short-0"', '"caf\u00e9"') + "\n").encode("latin-1"),
    "UTF-16": (line() + "\n").encode("utf-16"),
    "empty file": b"",
    "only blank lines": b"\n\n   \n",
}


@pytest.fixture
def seeded(dbpath):
    """A database holding one good import already (a bad import must not touch it)."""
    engine = get_engine(str(dbpath))
    res = cli(dbpath, "runs", "import", str(STUDY), "--json")
    assert res.exit_code == 0, res.output
    return dbpath, engine, counts(engine)


def test_named_garbage_variants_leave_nothing_behind(seeded, tmp_path, fault_figures):
    db, engine, before = seeded
    failures = []
    for name, data in VARIANTS.items():
        f = tmp_path / name.replace(" ", "_") / "requests.jsonl"
        f.parent.mkdir()
        f.write_bytes(data)
        res = cli(db, "runs", "import", str(f))
        out = res.output
        ok = (
            (res.exit_code == 2 and res.exception is None or isinstance(res.exception, SystemExit))
            and "Traceback" not in out
            and f"{f}" in out
            and counts(engine) == before
        )
        if name not in ("empty file", "only blank lines"):
            ok = ok and f"{f}:" in out  # file:line
        if not ok:
            failures.append((name, res.exit_code, repr(res.exception), out[-400:]))
    left = counts(engine)[0] - before[0]
    fault_figures["runs import garbage (named)"].add(
        trials=len(VARIANTS), failures=len(failures), rows_lost=0, orphans=left
    )
    assert not failures, failures
    assert len(VARIANTS) >= 34


def test_every_bad_line_is_reported(dbpath, tmp_path):
    f = tmp_path / "requests.jsonl"
    f.write_text("\n".join([line(submitted_unix="yesterday"), OK2, chunk_line(0, t_ms=-500), "{oops"]) + "\n")
    res = cli(dbpath, "runs", "import", str(f))
    assert res.exit_code == 2, res.output
    assert f"{f}:1:" in res.output and f"{f}:3:" in res.output and f"{f}:4:" in res.output
    assert f"{f}:2:" not in res.output and "3 problems" in res.output and "nothing was imported" in res.output


@pytest.mark.parametrize(
    ("over", "needle"),
    [
        ({"samples": 10**30}, "samples: Input should be less than or equal to 2147483647"),
        ({"idx": 2**63}, "idx: Input should be less than or equal to 2147483647"),
        ({"t_ms": 1e308}, "t_ms: Input should be less than or equal to 86400000"),
    ],
)
def test_a_number_out_of_range_is_a_line_numbered_usage_error(dbpath, tmp_path, over, needle):
    """Once an OverflowError from the database ('this is a bug in edgelab', exit 1); now refused
    on its line before anything is written."""
    f = tmp_path / "requests.jsonl"
    f.write_text(OK2 + "\n" + chunk_line(0, **over) + "\n")
    res = cli(dbpath, "runs", "import", str(f))
    assert res.exit_code == 2, res.output
    assert f"{f}:2: chunks_all.0.{needle}" in res.output, res.output
    assert "bug" not in res.output and "Traceback" not in res.output


def test_many_bad_lines_are_counted_not_all_kept(dbpath, tmp_path):
    f = tmp_path / "requests.jsonl"
    f.write_text("".join("{oops\n" for _ in range(5000)))
    res = cli(dbpath, "runs", "import", str(f))
    assert res.exit_code == 2 and "5000 problems" in res.output and "and 4950 more bad lines" in res.output
    assert res.output.count("not JSON") == 50


def test_import_memory_follows_the_largest_record_not_the_file(tmp_path):
    """The import streams: an 8 MB study file costs about what the 2 kB fixture costs (the process's
    own libraries), not a multiple of the file (it was ~17 times the file's size)."""
    import os
    import subprocess
    import sys

    sys.path.insert(0, str(Path(__file__).parents[2] / "benchmarks"))
    from import_memory import write_study

    big = tmp_path / "big"
    big.mkdir()
    write_study(big / "requests.jsonl", 8.0, 150)
    size_mb = (big / "requests.jsonl").stat().st_size / 1e6

    def peak_mb(study: Path, db: Path) -> float:
        env = {**os.environ, "EDGELAB_DB": f"sqlite:///{db}", "EDGELAB_DB_CREATE": "1"}
        cmd = [sys.executable, "-c", "from edgelab.cli import main; main()", "runs", "import", str(study)]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _pid, status, usage = os.wait4(proc.pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, proc.stderr.read() if proc.stderr else ""
        return usage.ru_maxrss / 1024.0

    small, large = peak_mb(STUDY, tmp_path / "a.db"), peak_mb(big, tmp_path / "b.db")
    print(f"peak RSS: {small:.0f} MB for the fixture, {large:.0f} MB for {size_mb:.1f} MB of records")
    assert large - small < size_mb + 15, (small, large, size_mb)


def test_one_bad_run_in_a_tree_writes_none_of_them(dbpath, tmp_path):
    shutil.copytree(STUDY, tmp_path / "tree" / "a")
    (tmp_path / "tree" / "b").mkdir()
    (tmp_path / "tree" / "b" / "requests.jsonl").write_text(line(submitted_unix="yesterday") + "\n")
    engine = get_engine(str(dbpath))
    before = counts(engine)
    res = cli(dbpath, "runs", "import", str(tmp_path / "tree"))
    assert res.exit_code == 2 and "b/requests.jsonl:1" in res.output
    assert counts(engine) == before


def _mutate(value, draw):
    return draw(
        st.one_of(
            st.none(),
            st.booleans(),
            st.integers(-(10**20), 10**20),
            st.floats(allow_nan=True, allow_infinity=True),
            st.text(max_size=20),
            st.lists(st.integers(), max_size=3),
            st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
            st.just(value),
        )
    )


@st.composite
def garbage_inputs(draw):
    rec = json.loads(json.dumps(GOOD))
    keys = [
        "request_id",
        "submitted_unix",
        "finished_unix",
        "phase",
        "length_band",
        "sr",
        "error",
        "chunks_all",
    ]
    for k in draw(st.lists(st.sampled_from(keys), min_size=1, max_size=3, unique=True)):
        rec[k] = _mutate(rec.get(k), draw)
    if isinstance(rec.get("chunks_all"), list) and rec["chunks_all"] and draw(st.booleans()):
        ch = rec["chunks_all"][draw(st.integers(0, len(rec["chunks_all"]) - 1))]
        if isinstance(ch, dict):
            k = draw(st.sampled_from(["idx", "t_ms", "samples", "sr", "terminal", "sha256"]))
            ch[k] = _mutate(ch.get(k), draw)
    text = json.dumps(rec, allow_nan=True)
    cut = draw(st.one_of(st.none(), st.integers(0, len(text))))
    data = (text if cut is None else text[:cut]).encode()
    if draw(st.booleans()):  # byte-level damage too
        pos = draw(st.integers(0, max(len(data) - 1, 0)))
        data = data[:pos] + draw(st.binary(min_size=1, max_size=4)) + data[pos + 1 :]
    return data + b"\n" + OK2.encode() + b"\n"


_HYP = {"trials": 0, "written": 0, "tracebacks": 0}


@pytest.mark.slow  # 120 garbage imports: ~30 s here
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=garbage_inputs())
def test_hypothesis_garbage_never_half_writes_nor_tracebacks(seeded, tmp_path, data, fault_figures):
    db, engine, before = seeded
    f = tmp_path / "requests.jsonl"
    f.write_bytes(data)
    dbmod.dispose_engines()
    res = cli(db, "runs", "import", str(f), "--json")
    _HYP["trials"] += 1
    after = counts(engine)
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output
    if res.exit_code == 0:  # the mutation happened to stay valid: exactly one whole run more
        rid = json.loads(res.stdout)[0]["id"]
        assert after[0] == before[0] + 1 and verify_recompute(engine, rid)
        with session_scope(engine, write=False) as s:
            summary = get_summary(s, rid, "final").metrics
        ttfa = summary["audio"]["ttfa_ms"]
        assert all(v is None or (math.isfinite(v) and v >= 0) for k, v in ttfa.items() if k != "count")
        cli(db, "runs", "rm", rid)
    else:
        assert res.exit_code == 2, res.output
        assert str(f) in res.output
    assert counts(engine) == before
    fault_figures["runs import garbage (hypothesis)"].add(trials=1, failures=0, orphans=0)


def test_export_import_round_trip_gives_the_same_figures(dbpath, tmp_path):
    engine = get_engine(str(dbpath))
    res = cli(dbpath, "runs", "import", str(STUDY), "--json")
    first = json.loads(res.stdout)[0]
    ra = json.loads(cli(dbpath, "runs", "show", first["id"], "--json").stdout)
    out = tmp_path / "exported"
    res = cli(dbpath, "runs", "export", first["id"], "--out", str(out))
    assert res.exit_code == 0, res.output
    # other bytes, the same records: beside the original it is the same measurement, refused
    res = cli(dbpath, "runs", "import", str(out))
    assert res.exit_code == 1 and first["id"] in res.output and "already imported" in res.output
    assert cli(dbpath, "runs", "rm", first["id"]).exit_code == 0
    res = cli(dbpath, "runs", "import", str(out), "--json")
    assert res.exit_code == 0, res.output
    second = json.loads(res.stdout)[0]
    assert second["id"] != first["id"] and second["summary"] == first["summary"]
    rb = json.loads(cli(dbpath, "runs", "show", second["id"], "--json").stdout)
    keep = ("request", "phase", "band", "submitted", "finished", "ok", "error", "metrics")
    assert [{k: q[k] for k in keep} for q in ra["requests"]] == [
        {k: q[k] for k in keep} for q in rb["requests"]
    ]
    assert rb["pipeline"] == ra["pipeline"] and rb["device"] == ra["device"]
    assert verify_recompute(engine, second["id"])


def test_a_live_run_exports_to_the_study_format_with_the_same_audio_figures(dbpath, tmp_path):
    engine = get_engine(str(dbpath))
    rid = start_run(engine, pipeline="qwen3-tts", device="virt", kind="bench", virtual=True)
    t0 = 1_750_000_000.0
    with Ingestor(engine, rid) as ing:
        ing.feed(ev.RunStart(t0, rid))
        for i, req in enumerate(("w", "m1", "m2")):
            base = t0 + 10 * i
            ing.feed(
                ev.RequestStart(
                    base, rid, request=req, phase="warmup" if i == 0 else "measured", band="short"
                )
            )
            for k, (dt, n) in enumerate([(0.3 + 0.1 * i, 1920), (1.2, 48000), (2.5, 48000)]):
                ing.feed(ev.AudioChunk(base + dt, rid, request=req, idx=k, samples=n, sample_rate=24000))
            ing.feed(ev.RequestEnd(base + 3.0, rid, request=req, ok=True))
        ing.feed(ev.RunEnd(t0 + 40, rid, state="finished"))
    res = cli(dbpath, "runs", "export", rid, "--out", str(tmp_path / "x"))
    assert res.exit_code == 0, res.output
    res = cli(dbpath, "runs", "import", str(tmp_path / "x"), "--json")
    assert res.exit_code == 0, res.output
    back = json.loads(res.stdout)[0]["summary"]
    with session_scope(engine, write=False) as s:
        orig = get_summary(s, rid, "final").metrics
    assert back["audio"] == orig["audio"] and back["requests"] == orig["requests"]


def test_the_same_input_twice_is_refused_naming_the_run(dbpath, tmp_path):
    engine = get_engine(str(dbpath))
    first = json.loads(cli(dbpath, "runs", "import", str(STUDY), "--json").stdout)[0]["id"]
    copy = tmp_path / "copy"
    shutil.copytree(STUDY, copy)  # another path, same bytes
    before = counts(engine)
    res = cli(dbpath, "runs", "import", str(copy))
    assert res.exit_code == 1 and first in res.output and "already imported" in res.output
    assert counts(engine) == before
    with session_scope(engine, write=False) as s:
        prov = s.get(Run, first).provenance
    assert len(prov["imported"]["requests_sha256"]) == 64


def test_runs_rm_deletes_a_run_and_everything_recorded_for_it(dbpath):
    engine = get_engine(str(dbpath))
    empty = counts(engine)
    rid = json.loads(cli(dbpath, "runs", "import", str(STUDY), "--json").stdout)[0]["id"]
    assert counts(engine)[2] == 12
    res = cli(dbpath, "runs", "rm", rid, "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout) == [
        {"id": rid, "state": "finished", "kind": "imported", "requests": 4, "samples": 12}
    ]
    assert counts(engine) == empty
    assert cli(dbpath, "runs", "rm", rid).exit_code == 1  # gone: not found
    # and once it is gone, the same input imports again
    assert cli(dbpath, "runs", "import", str(STUDY)).exit_code == 0


def test_runs_rm_refuses_a_running_run_unless_forced(dbpath):
    engine = get_engine(str(dbpath))
    rid = start_run(engine, pipeline="qwen3-tts", device="virt", kind="bench", virtual=True)
    with session_scope(engine) as s:
        s.get(Run, rid).state = "running"
    res = cli(dbpath, "runs", "rm", rid)
    assert res.exit_code == 1 and "running" in res.output and "--force" in res.output
    assert counts(engine)[0] == 1
    res = cli(dbpath, "runs", "rm", rid, "--force")
    assert res.exit_code == 0, res.output
    assert counts(engine)[0] == 0
