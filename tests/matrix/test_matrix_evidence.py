"""The matrix qualifies only on real evidence: each of issue 12's four wrong qualifications is
refused with its reason, and a complete run of the right device and pipeline qualifies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evidence_runs import evidence_run, probed_device

from edgelab.errors import EvidenceRefused
from edgelab.matrix import record_outcome, resolve_cell, set_cell
from edgelab.matrix.evidence import judge_run, missing_provenance
from edgelab.metrics.results import import_study
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.matrix import history
from edgelab.store.runs import get_run

STUDY = Path(__file__).parents[1] / "fixtures" / "study_run"


@pytest.fixture()
def engine(tmp_path):
    eng = get_engine(f"sqlite:///{tmp_path / 'm.db'}")
    with session_scope(eng) as s:  # plain (non-virtual) devices, as in the report
        probed_device(s, "lab-s25", "galaxy-s25")
        probed_device(s, "lab-rb3", "rb3-gen2")
        # the S25 TTS run: reference runtime, random weights, 3 requests
        evidence_run(
            s,
            "r-s25-ref",
            "lab-s25",
            "qwen3-tts-0.6b",
            runtime="reference",
            weights="random",
            warmup=0,
            measured=3,
        )
        evidence_run(s, "r-s25-real", "lab-s25", "qwen3-tts-0.6b")
    yield eng
    dbmod.dispose_engines()


def refused(eng, cell: str, runs: list[str]) -> str:
    with session_scope(eng) as s, pytest.raises(EvidenceRefused) as err:
        set_cell(s, cell, status="PASS", performance="PASS", stage="qualified", evidence=runs)
    with session_scope(eng) as s:  # nothing moved, nothing recorded
        c = resolve_cell(s, cell)
        assert c.stage == "none" and c.evidence == [] and history(s, c.id) == []
    return str(err.value)


def test_1_a_random_weights_reference_run_of_3_requests_does_not_qualify_s25_tts(engine):
    msg = refused(engine, "galaxy-s25/qwen3-tts-0.6b", ["r-s25-ref"])
    assert "reference runtime" in msg and "weights: random" in msg
    assert "0 warm-up and 3 measured (needs >= 1 and >= 20)" in msg


def test_2_the_s25_run_does_not_qualify_the_rb3_row(engine):
    msg = refused(engine, "rb3-gen2/qwen3-tts-0.6b", ["r-s25-real"])
    assert "device lab-s25 is catalog entry galaxy-s25 (row 9), not row 12 rb3-gen2" in msg


def test_3_the_s25_tts_run_does_not_qualify_a_text_lm_cell(engine):
    msg = refused(engine, "galaxy-s25/spark-x2.5", ["r-s25-real"])
    assert "ran pipeline qwen3-tts-0.6b, not this column's spark-x2.5" in msg
    assert "catalog entry" not in msg  # the row is right: only the column is named


def test_4_an_imported_rtx5090_tts_study_run_does_not_qualify_s24_internvla(engine):
    rid = import_study(engine, STUDY)
    msg = refused(engine, "galaxy-s24/internvla-a1", [rid])
    assert "device rtx5090-laptop-wsl is not in the inventory" in msg
    assert "ran pipeline qwen3-tts-0.6b, not this column's internvla-a1" in msg


def test_a_complete_run_of_the_right_device_and_pipeline_qualifies(engine):
    with session_scope(engine) as s:
        cell, _ = set_cell(
            s,
            "9/2",
            status="PASS",
            performance="PASS",
            stage="qualified",
            evidence=["r-s25-real"],
            source="manual:alice",
        )
        assert (cell.stage, cell.functional, cell.performance) == ("qualified", "PASS", "PASS")
        (change,) = history(s, cell.id)
        assert change.source == "manual:alice" and change.evidence == ["r-s25-real"] and change.at is not None


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"drop": ("runtime_sha256", "cache")}, "provenance incomplete: runtime_sha256, cache unknown"),
        ({"weights": "unknown"}, "weights unknown"),
        ({"state": "failed"}, "state failed, not finished"),
        ({"protocol": None}, "did not follow single_request_batch1_v1"),
        ({"bands": ("short", "long"), "measured": 19}, "band long has 1 warm-up and 19 measured"),
    ],
)
def test_each_missing_condition_is_named(engine, kw, needle):
    with session_scope(engine) as s:
        evidence_run(s, "r-bad", "lab-s25", "qwen3-tts-0.6b", **kw)
        v = judge_run(s, get_run(s, "r-bad"), "galaxy-s25", "qwen3-tts-0.6b")
    assert not v.ok and any(needle in f for f in v.failures), v.failures


def test_profiled_is_guarded_too_and_functional_stays_apart(engine):
    with session_scope(engine) as s:
        with pytest.raises(EvidenceRefused, match="reference runtime"):
            set_cell(s, "9/2", stage="profiled", performance="PASS", evidence=["r-s25-ref"])
        # a playbook whose gates passed on the reference run: functional PASS, performance not claimed
        note = record_outcome(
            s,
            row_key="galaxy-s25",
            pipeline="qwen3-tts",
            run_ids=["r-s25-ref"],
            passed=True,
            gated=True,
            qualify=True,
            source="play:tts",
        )
        cell = resolve_cell(s, "9/2")
        assert (cell.stage, cell.functional, cell.performance) == ("executes", "PASS", None)
        assert "not qualified" in note and "weights: random" in note
        assert "weights: random" in history(s, cell.id)[-1].note
        note = record_outcome(
            s,
            row_key="galaxy-s25",
            pipeline="qwen3-tts",
            run_ids=["r-s25-real"],
            passed=True,
            gated=True,
            qualify=True,
            source="play:tts",
        )
        assert resolve_cell(s, "9/2").stage == "qualified", note


def test_missing_provenance_counts_unknown_as_missing():
    assert missing_provenance({"runtime": "unknown", "artifacts": {"a": None}}) == [
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
    ]


def test_matrix_cell_view_says_why_each_evidence_run_would_not_qualify(engine, monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from edgelab.cli import app

    with session_scope(engine) as s:  # executes on the reference run (a playbook's functional PASS)
        record_outcome(
            s,
            row_key="galaxy-s25",
            pipeline="qwen3-tts",
            run_ids=["r-s25-ref"],
            passed=True,
            gated=False,
            source="play:tts",
        )
    url = str(engine.url)
    res = CliRunner().invoke(app, ["--db", url, "matrix", "--cell", "9/2", "--json"])
    assert res.exit_code == 0, res.output
    (v,) = json.loads(res.output)["evidence_check"]
    assert v["run"] == "r-s25-ref" and not v["ok"] and any("weights: random" in f for f in v["failures"])
