"""The qualification matrix: 60 cells, the ladder, manual evidence, and the virtual-run refusal."""

from __future__ import annotations

import json

import pytest
from evidence_runs import evidence_run, probed_device
from typer.testing import CliRunner

from edgelab.catalog import load_devices, load_pipelines
from edgelab.errors import ConfigError, VirtualEvidence
from edgelab.matrix import COLUMNS, ROWS, record_outcome, resolve_cell, seed_matrix, set_cell
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.devices import add_device
from edgelab.store.matrix import history
from edgelab.store.models import Device
from edgelab.store.runs import create_run

runner = CliRunner()


@pytest.fixture()
def engine(tmp_path):
    url = f"sqlite:///{tmp_path / 'm.db'}"
    eng = get_engine(url)
    with session_scope(eng) as s:
        add_device(s, Device(name="s25", transport="adb", adb_serial="x", virtual=True))
        probed_device(s, "lab-s25", "galaxy-s25")
        create_run(
            s, id="rvirt", device_name="s25", pipeline="qwen3-tts-0.6b", virtual=True, state="finished"
        )
        evidence_run(s, "rreal", "lab-s25", "qwen3-tts-0.6b")  # complete evidence (see test_matrix_evidence)
    yield eng, url
    dbmod.dispose_engines()


def test_layout_matches_the_catalogs():
    rows = load_devices().matrix_rows()
    assert [r.index for r in ROWS] == list(range(1, 13))
    assert {r.index: r.key for r in ROWS} == {i: e.id for i, e in rows.items()}
    pipelines = load_pipelines()
    assert all(c.key in pipelines for c in COLUMNS) and len(COLUMNS) == 5


def test_seed_is_60_cells_once(engine):
    eng, _ = engine
    with session_scope(eng) as s:
        assert seed_matrix(s) == 60
        assert seed_matrix(s) == 0
        assert resolve_cell(s, "9/2").id == "galaxy-s25/qwen3-tts-0.6b"
        assert resolve_cell(s, "r12c5").id == "rb3-gen2/internvla-a1"


def test_virtual_run_never_qualifies(engine):
    eng, _ = engine
    with session_scope(eng) as s, pytest.raises(VirtualEvidence, match="virtual device s25"):
        set_cell(s, "galaxy-s25/qwen3-tts-0.6b", stage="qualified", performance="PASS", evidence=["rvirt"])
    with session_scope(eng) as s:
        cell = resolve_cell(s, "9/2")
        assert cell.stage == "none" and cell.evidence == [] and history(s, cell.id) == []


def test_real_run_qualifies_with_performance_pass(engine):
    eng, _ = engine
    with session_scope(eng) as s:
        with pytest.raises(ConfigError, match="performance status PASS"):
            set_cell(s, "9/2", status="qualified", evidence=["rreal"])
        cell, _ = set_cell(s, "9/2", status="qualified", performance="PASS", evidence=["rreal"])
        assert (cell.stage, cell.performance, cell.evidence) == ("qualified", "PASS", ["rreal"])
        assert len(history(s, cell.id)) == 1


def test_blocked_needs_layer_reason_and_next_experiment(engine):
    eng, _ = engine
    with session_scope(eng) as s:
        with pytest.raises(ConfigError, match="--layer"):
            set_cell(s, "10/3", status="BLOCKED", reason="no QNN graph")
        with pytest.raises(ConfigError, match="--kind"):  # the device's blocker, or the lab's to build?
            set_cell(
                s, "10/3", status="BLOCKED", reason="no QNN graph", layer="artifact", next_experiment="x"
            )
        cell, _ = set_cell(
            s,
            "10/3",
            status="BLOCKED",
            reason="no QNN graph",
            layer="artifact",
            next_experiment="export with QNN SDK 2.30",
            kind="implementation",
        )
        assert (cell.stage, cell.functional, cell.failing_layer) == ("blocked", "BLOCKED", "artifact")
        assert cell.blocker_kind == "implementation"
        with pytest.raises(ConfigError, match="--reason"):
            set_cell(s, "12/3", status="REJECTED")
        cell, _ = set_cell(s, "12/3", status="REJECTED", reason="weights 54 GiB > pool 6 GiB")
        assert cell.blocker_kind == "feasibility"  # capacity is the device's


def test_a_word_above_partial_needs_a_real_finished_run(engine):
    eng, _ = engine
    with session_scope(eng) as s:
        with pytest.raises(ConfigError, match="PASS needs evidence"):
            set_cell(s, "9/2", status="PASS")
        with pytest.raises(ConfigError, match="ran on a virtual device"):
            set_cell(s, "9/2", status="PASS", evidence=["rvirt"])
        with pytest.raises(ConfigError, match="PASS needs evidence"):
            set_cell(s, "9/2", performance="PASS")
        cell, _ = set_cell(s, "9/2", status="PARTIAL")  # PARTIAL and below: a word, no claim of a pass
        assert cell.functional == "PARTIAL"
        cell, _ = set_cell(s, "9/2", status="PASS", evidence=["rreal"])
        assert cell.functional == "PASS" and cell.evidence == ["rreal"]


def test_playbook_outcome_on_virtual_device_only_attaches_demo_evidence(engine):
    eng, _ = engine
    with session_scope(eng) as s:
        note = record_outcome(
            s,
            row_key="galaxy-s25",
            pipeline="qwen3-tts",
            run_ids=["rvirt"],
            passed=True,
            gated=True,
            source="play:t",
            qualify=True,
        )
        assert "virtual" in note
        cell = resolve_cell(s, "9/2")
        assert cell.stage == "none" and cell.demo_evidence == ["rvirt"] and cell.evidence == []
        note = record_outcome(
            s,
            row_key="galaxy-s25",
            pipeline="qwen3-tts",
            run_ids=["rreal"],
            passed=True,
            gated=True,
            source="play:t",
        )
        assert (cell.stage, cell.functional, cell.performance) == ("profiled", "PASS", "PASS")
        record_outcome(
            s,
            row_key="galaxy-s25",
            pipeline="qwen3-tts",
            run_ids=["rreal"],
            passed=False,
            gated=True,
            source="play:t",
            failing_layer="performance",
            reason="rtf 1.3",
        )
        assert cell.performance == "FAILED" and cell.functional == "PASS"


def test_cli_shows_60_cells_and_refuses_virtual_qualification(engine, monkeypatch):
    _, url = engine
    monkeypatch.setenv("EDGELAB_DB", url)
    res = runner.invoke(__import__("edgelab.cli", fromlist=["app"]).app, ["matrix", "--json"])
    assert res.exit_code == 0, res.output
    cells = json.loads(res.stdout)
    assert len(cells) == 60 and len({c["id"] for c in cells}) == 60
    app = __import__("edgelab.cli", fromlist=["app"]).app
    res = runner.invoke(app, ["matrix"])
    assert res.exit_code == 0 and "60 cells" in res.stdout and "RB3 Gen 2" in res.stdout
    res = runner.invoke(
        app, ["matrix", "set", "9/2", "--status", "qualified", "--performance", "PASS", "--evidence", "rvirt"]
    )
    assert res.exit_code == 1 and "virtual" in res.stderr and "never qualifies" in res.stderr
    res = runner.invoke(app, ["matrix", "--cell", "9/2", "--json"])
    assert json.loads(res.stdout)["stage"] == "none"
    res = runner.invoke(app, ["matrix", "set", "9/2", "--status", "PASS", "--evidence", "rreal", "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["stage"] == "executes"
