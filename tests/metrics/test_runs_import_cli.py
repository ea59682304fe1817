"""The study's requests.jsonl imported as a run, metrics recomputed from raw chunks; runs/watch CLI."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from edgelab.cli import app
from edgelab.metrics import events as ev
from edgelab.metrics.ingest import Ingestor
from edgelab.metrics.provenance import run_provenance
from edgelab.metrics.results import import_study
from edgelab.store.db import get_engine, session_scope
from edgelab.store.runs import create_run, get_run, get_summary, requests_of, samples_of

STUDY = Path(__file__).parents[1] / "fixtures" / "study_run"
runner = CliRunner()


def cli(db, *args):
    return runner.invoke(app, ["--db", str(db), *args])


def test_import_recomputes_every_metric_from_raw_chunks(dbpath):
    engine = get_engine(str(dbpath))
    rid = import_study(engine, STUDY)
    with session_scope(engine, write=False) as s:
        run = get_run(s, rid)
        final = get_summary(s, rid, "final").metrics
        reqs = {r.request: r for r in requests_of(s, rid)}
        chunks = samples_of(s, rid, kind="audio")
    assert run.kind == "imported" and run.state == "finished"
    assert run.pipeline == "qwen3-tts-0.6b" and run.device_name == "rtx5090-laptop-wsl"  # from report.json
    assert run.meta["report"]["protocol"] == "single_request_batch1_v1"
    assert run.provenance["imported"]["requests_sha256"] and run.provenance["source"] == "imported"
    assert len(chunks) == 3 + 4 + 4 + 1  # every raw chunk kept, terminal markers included

    # short-0: t = 412.5 (80 ms), 1650 (2000 ms), 2900 (2000 ms), 3150 (terminal, 0 samples); wall 3200
    # C = 0, 80, 2080 -> t - C = 412.5, 1570, 820 -> playback start 1570
    # at TTFA: chunk 1 needed 492.5, arrives 1650 -> stall 1157.5; chunk 2 needed 3650 > 2900 -> 1 underrun
    a0 = reqs["short-0"].metrics["audio"]
    assert a0["ttfa_ms"] == 412.5 and a0["playback_start_ms"] == pytest.approx(1570)
    assert a0["underruns_at_ttfa"] == 1 and a0["stall_ms_at_ttfa"] == pytest.approx(1157.5)
    assert a0["rtf_streamed"] == pytest.approx(2900 / 4080) and a0["rtf_total"] == pytest.approx(3200 / 4080)
    # short-2 never finished: total RTF unknown (null), and it counts as not ok
    assert reqs["short-2"].metrics["audio"]["rtf_total"] is None and reqs["short-2"].ok is False

    a = final["audio"]
    # measured TTFA 412.5, 380, 450 -> sorted 380, 412.5, 450: p50 rank 2 = 412.5, p95 rank 3 = 450
    assert a["ttfa_ms"] == {
        "count": 3,
        "min": 380.0,
        "p50": 412.5,
        "p95": 450.0,
        "max": 450.0,
        "mean": pytest.approx((380 + 412.5 + 450) / 3),
    }
    # playback starts 1570, 1520 (short-1: 1600 - 80), 450 -> p50 1520, p95 1570
    assert (a["playback_start_ms"]["p50"], a["playback_start_ms"]["p95"]) == (
        pytest.approx(1520),
        pytest.approx(1570),
    )
    assert a["underruns_at_ttfa"] == 2 and a["requests_with_underrun"] == 2
    assert a["rtf_total"]["count"] == 2  # the unfinished request is unknown, not zero
    # gaps 1237.5, 1250 (short-0), 1220, 1200 (short-1) -> p50 rank 2 = 1220, p95 rank 4 = 1250
    assert a["chunk_gaps_ms"]["count"] == 4
    assert (a["chunk_gaps_ms"]["p50"], a["chunk_gaps_ms"]["p95"]) == (
        pytest.approx(1220),
        pytest.approx(1250),
    )
    assert final["requests"]["by_phase"] == {"warmup": 1, "measured": 3}
    short = a["by_band"]["short"]  # the study's length bands are reported apart
    assert list(a["by_band"]) == ["short"] and short["requests"] == 3 and short["underruns_at_ttfa"] == 2
    assert short["ttfa_ms"] == a["ttfa_ms"]


def test_imported_and_live_runs_sit_in_one_table(dbpath, tmp_path):
    only = tmp_path / "only"
    only.mkdir()
    shutil.copy(STUDY / "requests.jsonl", only / "requests.jsonl")  # no report.json beside it
    res = cli(
        dbpath,
        "runs",
        "import",
        str(only / "requests.jsonl"),
        "--device",
        "s25",
        "--pipeline",
        "qwen3-tts",
        "--json",
    )
    assert res.exit_code == 0, res.output
    imported = json.loads(res.stdout)[0]["id"]
    engine = get_engine(str(dbpath))
    with session_scope(engine) as s:
        live = create_run(
            s,
            pipeline="qwen3-tts",
            device_name="virt-orin",
            runtime="reference",
            virtual=True,
            provenance=run_provenance(
                None,
                source="bench",
                device="virt-orin",
                virtual=True,
                runtime="reference",
                command=["edgelab", "bench", "qwen3-tts"],
                cache="warm",
            ),
        ).id
    with Ingestor(engine, live) as ing:
        ing.feed_all(
            [
                ev.RunStart(t=1.0),
                ev.RequestStart(t=1.0, request="a"),
                ev.AudioChunk(t=1.2, request="a", samples=1920),
                ev.RequestEnd(t=1.3, request="a"),
                ev.ResourceSample(t=1.25, device="virt-orin", temps_c={"CPU": 51.5}),
            ]
        )
    rows = json.loads(cli(dbpath, "runs", "ls", "--json").stdout)
    assert {r["id"] for r in rows} == {imported, live}
    assert {r["kind"] for r in rows} == {"imported", "bench"}
    shown = json.loads(cli(dbpath, "runs", "show", live[:6], "--json").stdout)
    assert (
        shown["provenance"]["virtual"] is True and shown["provenance"]["command"] == "edgelab bench qwen3-tts"
    )
    assert shown["provenance"]["runtime_sha256"] == "unknown"  # applies, not recorded: said so
    assert shown["summary"]["audio"]["ttfa_ms"]["p50"] == pytest.approx(200)
    exported = json.loads(cli(dbpath, "runs", "export", imported, "--samples").stdout)
    assert len(exported["samples"]) == 12 and exported["samples"][0]["sha256"]
    frame = cli(dbpath, "watch", live, "--once")
    assert frame.exit_code == 0 and "TTFA" in frame.stdout and "51.5" in frame.stdout
    missing = cli(dbpath, "runs", "show", "rnope")
    assert missing.exit_code == 1 and "runs ls" in missing.output


def test_import_a_results_directory_of_several_runs(dbpath, tmp_path):
    for name in ("s25-short", "orin-long"):
        shutil.copytree(STUDY, tmp_path / "results" / name)
    # a byte-identical copy is the same input (refused below); this one is a different measurement
    other = tmp_path / "results" / "orin-long" / "requests.jsonl"
    other.write_text(
        other.read_text().replace('"submitted_unix": 1750000010.0', '"submitted_unix": 1750000010.5')
    )
    res = cli(dbpath, "runs", "import", str(tmp_path / "results"), "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert [Path(r["source"]).parent.name for r in out] == ["orin-long", "s25-short"]
    assert all(r["requests"] == 4 and r["summary"]["audio"]["underruns_at_ttfa"] == 2 for r in out)
    assert len({r["id"] for r in out}) == 2
    empty = tmp_path / "empty"
    empty.mkdir()
    res = cli(dbpath, "runs", "import", str(empty))
    assert res.exit_code == 2 and "no requests.jsonl" in res.output


def test_import_errors_name_file_and_line(dbpath, tmp_path):
    bad = tmp_path / "requests.jsonl"
    bad.write_text('{"request_id": "a", "submitted_unix": 1, "chunks_all": []}\n{not json\n')
    res = cli(dbpath, "runs", "import", str(bad))
    assert res.exit_code == 2 and f"{bad}:2" in res.output  # malformed input is a usage error
    res = cli(dbpath, "runs", "import", str(tmp_path / "nowhere"))
    assert res.exit_code == 2 and "does not exist" in res.output
