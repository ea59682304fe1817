"""The Matrix screen: the 12 x 5 grid from the real matrix store, cell detail, evidence runs with
their VIRTUAL flag, enter opens the Run screen; cells backed only by virtual runs are never shown
as qualified. Pilot flows plus one snapshot on a seeded database with fixed times.

Update the snapshot after an intended UI change:
    python -m pytest tests/tui/test_tui_matrix.py --snapshot-update
"""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from evidence_runs import evidence_run, probed_device
from rich.console import Console
from sqlmodel import select
from tui_seed import NOW, seed
from tui_wait import settle

from edgelab.errors import VirtualEvidence
from edgelab.matrix import record_outcome, set_cell
from edgelab.store.db import dispose_engines, get_engine, session_scope
from edgelab.store.devices import add_device
from edgelab.store.matrix import MatrixCell
from edgelab.store.models import Device
from edgelab.store.runs import create_run
from edgelab.tui.app import EdgelabApp
from edgelab.tui.screens.fleet import FleetScreen
from edgelab.tui.screens.matrix import MatrixScreen
from edgelab.tui.screens.run import RunScreen
from edgelab.tui.widgets.evidence_table import EvidenceTable
from edgelab.tui.widgets.matrix_grid import MatrixGrid
from edgelab.views.matrix import load_matrix

SIZE = (150, 45)
S25_TTS = "galaxy-s25/qwen3-tts-0.6b"
S24_TTS = "galaxy-s24/qwen3-tts-0.6b"  # virtual evidence only
FORGED = "rb3-gen2/qwen3-tts-0.6b"  # stage says qualified, only a virtual run behind it (hand-edited DB)


def seed_matrix_lab(engine) -> None:
    """Virtual fleet (tui_seed) + one real phone; cells in every status through the matrix API."""
    seed(engine, 6)
    with session_scope(engine) as s:
        dev = add_device(
            s,
            Device(
                name="s25-bench",
                transport="adb",
                device_class="npu_phone",
                virtual=False,
                adb_serial="R5CX00TEST",
                state="online",
                created_at=NOW,
                updated_at=NOW,
            ),
        )
        probed_device(s, "s25-bench", "galaxy-s25", device=dev)
        # complete evidence: llama.cpp on real weights, 1 + 20 requests, full provenance
        evidence_run(s, "r-s25-tts", "s25-bench", "qwen3-tts-0.6b", created_at=NOW - timedelta(hours=1))
        for i, (rid, dev, pipe, state, virtual) in enumerate(
            [
                ("r-s25-vla", "s25-bench", "internvla-a1", "failed", False),
                ("r-virt-tts", "s25-001", "qwen3-tts-0.6b", "finished", True),
                ("r-virt-vla", "orin-agx-000", "internvla-a1", "finished", True),
            ]
        ):
            create_run(
                s,
                id=rid,
                device_name=dev,
                pipeline=pipe,
                state=state,
                virtual=virtual,
                kind="bench",
                created_at=NOW - timedelta(hours=i + 2),
            )
    with session_scope(engine) as s:
        set_cell(s, S25_TTS, status="PASS", performance="PASS", stage="qualified", evidence=["r-s25-tts"])
        with pytest.raises(VirtualEvidence):
            set_cell(
                s,
                "galaxy-s24/internvla-a1",
                status="PASS",
                performance="PASS",
                stage="qualified",
                evidence=["r-virt-vla"],
            )
    with session_scope(engine) as s:
        record_outcome(
            s,
            row_key="galaxy-s24",
            pipeline="qwen3-tts",
            run_ids=["r-virt-tts"],
            passed=True,
            gated=True,
            qualify=True,
            source="play:smoke",
        )
        record_outcome(
            s,
            row_key="galaxy-s25",
            pipeline="internvla-a1",
            run_ids=["r-s25-vla"],
            passed=False,
            gated=True,
            failing_layer="performance",
            reason="deadline misses 4% > 1%",
            source="play:vla-deadline",
        )
        set_cell(s, "hx370-wsl-cpu/qwen3.8-27b", status="REJECTED", reason="weights 54 GiB > pool 32 GiB")
        set_cell(
            s,
            "rb3-gen2/internvla-a1",
            status="BLOCKED",
            layer="memory",
            reason="OOM loading the vision tower",
            next_experiment="int4 vision tower with mmap",
            kind="feasibility",
        )
        set_cell(s, "sa8775p-adp/minicpm-o-4.5", status="PARTIAL", reason="audio head only")
        set_cell(s, "snapdragon-x-elite-pc/spark-x2.5", status="COMPONENT")
        set_cell(s, "hx370-rtx5090-wsl/qwen3-tts-0.6b", status="PROFILE_ONLY", performance="PROFILE_ONLY")
        set_cell(s, "hx370-890m-win/spark-x2.5", stage="artifact_ready")
        set_cell(
            s, "hx370-win-cpu/qwen3-tts-0.6b", status="FAILED", layer="runtime", reason="ORT build lacks op"
        )
    with session_scope(engine) as s:  # a hand-edited row no API would write: qualified on a virtual run
        forged = s.get(MatrixCell, FORGED)
        forged.stage, forged.functional, forged.performance = "qualified", "PASS", "PASS"
        forged.evidence = ["r-virt-tts"]
        for c in s.exec(select(MatrixCell).where(MatrixCell.updated_by != "seed")).all():
            c.updated_at = NOW - timedelta(minutes=30)
            s.add(c)


@pytest.fixture
def engine(tmp_path):
    eng = get_engine(str(tmp_path / "lab.db"))
    seed_matrix_lab(eng)
    yield eng
    dispose_engines()


def app_for(engine) -> EdgelabApp:
    return EdgelabApp(engine, clock=lambda: NOW, poll_s=3600, run_poll_s=3600)


async def open_matrix(app, pilot) -> None:
    await settle(app, pilot)
    assert isinstance(app.screen, FleetScreen) and app.screen.loaded
    await pilot.press("M")
    await settle(app, pilot)
    assert isinstance(app.screen, MatrixScreen) and app.screen.loaded


def panel_text(widget) -> str:
    """The text a Rich renderable (the detail pane's table) prints, as a reader sees it."""
    console = Console(width=120, record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


def text_of(app, row_key: str, pipeline: str) -> str:
    return str(app.screen.query_one(MatrixGrid).get_cell(row_key, pipeline))


def test_load_matrix_flags(engine) -> None:
    cells = {c.id: c for c in load_matrix(engine)}
    assert len(cells) == 60
    assert cells[S25_TTS].qualified and not cells[S25_TTS].virtual_only
    assert [(e.id, e.virtual, e.demo) for e in cells[S25_TTS].evidence] == [("r-s25-tts", False, False)]
    s24 = cells[S24_TTS]
    assert s24.virtual_only and not s24.qualified and s24.stage == "none"
    assert [(e.id, e.device, e.virtual, e.demo) for e in s24.evidence] == [
        ("r-virt-tts", "s25-001", True, True)
    ]
    forged = cells[FORGED]
    assert forged.stage == "qualified" and not forged.qualified and forged.virtual_only
    assert cells["galaxy-s25/internvla-a1"].performance == "FAILED"
    assert sum(c.qualified for c in cells.values()) == 1


def test_load_matrix_seeds_an_empty_table(tmp_path) -> None:
    eng = get_engine(str(tmp_path / "empty.db"))
    try:
        cells = load_matrix(eng)
        assert len(cells) == 60 and {c.stage for c in cells} == {"none"}
        assert (cells[0].row, cells[0].col, cells[-1].row, cells[-1].col) == (1, 1, 12, 5)
    finally:
        dispose_engines()


async def test_grid_detail_and_open_run(engine) -> None:
    app = app_for(engine)
    async with app.run_test(size=SIZE) as pilot:
        await open_matrix(app, pilot)
        grid = app.screen.query_one(MatrixGrid)
        assert (grid.row_count, len(grid.columns)) == (12, 6)
        assert text_of(app, "galaxy-s25", "qwen3-tts-0.6b").startswith("* PASS")
        assert "(v)" in text_of(app, "galaxy-s24", "qwen3-tts-0.6b")
        forged = text_of(app, "rb3-gen2", "qwen3-tts-0.6b")
        assert "(v)" in forged and "*" not in forged and "PASS" not in forged.splitlines()[0]
        assert text_of(app, "rb3-gen2", "internvla-a1").startswith("BLOCKED")
        assert text_of(app, "hx370-wsl-cpu", "qwen3.8-27b").startswith("REJECTED")
        assert text_of(app, "hx370-890m-win", "spark-x2.5").startswith("artifact_ready")
        assert "perf FAILED" in text_of(app, "galaxy-s25", "internvla-a1")

        # row 9 (galaxy-s25), column 2 (qwen3-tts): from (0, 1) down 8, right 1
        await pilot.press(*["down"] * 8, "right")
        assert app.screen.current.id == S25_TTS
        detail = panel_text(app.screen.query_one("#matrix-detail"))
        assert "qualified" in detail and "1 real-device run(s)" in detail
        evidence = app.screen.query_one(EvidenceTable)
        assert [str(c) for c in evidence.get_row("r-s25-tts")][:5] == [
            "r-s25-tts",
            "s25-bench",
            "finished",
            "",
            "evidence",
        ]

        await pilot.press("down")  # galaxy-s24 (row 10): only a virtual run, shown as such
        assert app.screen.current.id == S24_TTS
        assert [str(c) for c in evidence.get_row("r-virt-tts")][3:5] == ["VIRTUAL", "demonstration"]
        assert "virtual evidence only" in panel_text(app.screen.query_one("#matrix-detail"))

        await pilot.press("up", "enter")  # back on galaxy-s25; enter on the cell -> its evidence runs
        assert app.focused is evidence
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, RunScreen)
        assert app.screen.run_id == "r-s25-tts"
        await pilot.press("escape")
        await settle(app, pilot)
        assert isinstance(app.screen, MatrixScreen)


async def test_blocked_cell_detail(engine) -> None:
    app = app_for(engine)
    async with app.run_test(size=SIZE) as pilot:
        await open_matrix(app, pilot)
        grid = app.screen.query_one(MatrixGrid)
        grid.move_cursor(row=11, column=5)  # rb3-gen2 x internvla-a1
        await settle(app, pilot)
        assert app.screen.current is not None and app.screen.current.id == "rb3-gen2/internvla-a1"
        detail = panel_text(app.screen.query_one("#matrix-detail"))
        for text in (
            "blocked",
            "BLOCKED",
            "memory",
            "OOM loading the vision tower",
            "int4 vision tower with mmap",
        ):
            assert text in detail
        await pilot.press("enter")  # no evidence: stays on the grid
        assert app.focused is grid


async def test_refresh_shows_a_change_from_elsewhere(engine) -> None:
    app = app_for(engine)
    async with app.run_test(size=SIZE) as pilot:
        await open_matrix(app, pilot)
        assert text_of(app, "sa8775p-adp", "spark-x2.5").startswith("-")
        with session_scope(engine) as s:  # as `edgelab matrix set` in another terminal would
            set_cell(s, "sa8775p-adp/spark-x2.5", status="PARTIAL")
        await pilot.press("r")
        await settle(app, pilot)
        assert text_of(app, "sa8775p-adp", "spark-x2.5").startswith("PARTIAL")


def test_matrix_snapshot(engine, snap_compare) -> None:
    app = app_for(engine)

    async def ready(pilot):
        await open_matrix(app, pilot)
        await pilot.press(*["down"] * 8, "right")  # galaxy-s25 x qwen3-tts: qualified, real evidence
        await settle(app, pilot)  # the grid's column widths are laid out after the cursor moves

    assert snap_compare(app, terminal_size=SIZE, run_before=ready)


async def test_cli_table_says_what_the_grid_says(engine, monkeypatch) -> None:
    """`edgelab matrix` and the Matrix screen word each cell from the same read model: the forged
    cell is "unproven (v)" in both, never qualified; the real one is "* PASS" in both."""
    from typer.testing import CliRunner

    from edgelab.cli import app as cli_app

    res = CliRunner().invoke(cli_app, ["--db", str(engine.url.database), "matrix"], env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    rows = {
        line.split("│")[2].strip(): [c.strip() for c in line.split("│")[3:8]]
        for line in res.stdout.splitlines()
        if line.count("│") == 8 and line.split("│")[1].strip().isdigit()
    }
    rb3 = next(v for k, v in rows.items() if "RB3" in k)
    s25 = next(v for k, v in rows.items() if "S25" in k)
    app = app_for(engine)
    async with app.run_test(size=SIZE) as pilot:
        await open_matrix(app, pilot)
        assert text_of(app, "rb3-gen2", "qwen3-tts-0.6b").splitlines()[0] == rb3[1] == "unproven (v)"
        assert text_of(app, "galaxy-s25", "qwen3-tts-0.6b").splitlines()[0] == s25[1] == "* PASS"
        assert text_of(app, "rb3-gen2", "internvla-a1").splitlines()[0] == rb3[4] == "BLOCKED"
