# ruff: noqa: F811 - pytest fixtures imported from test_deploy_helpers are parameters by design
"""The matrix drives the 60 cells: one command records what the lab knows (capacity refusals as
rejected, missing builds and models as blocked, each with its layer, reason, evidence, next
experiment and kind), every other cell gets its next step, and the Jetsons are said to serve no row."""

from __future__ import annotations

import json

from deploy.test_deploy_helpers import whole_lab  # noqa: F401 - fixture
from typer.testing import CliRunner

from edgelab.cli import app
from edgelab.matrix import set_cell
from edgelab.matrix.fill import assess, fill
from edgelab.store.db import session_scope
from edgelab.store.matrix import MatrixCell, list_cells

runner = CliRunner()


def test_one_command_leaves_no_cell_without_evidence_a_next_step_or_a_blocker(whole_lab):
    url, engine = whole_lab
    findings, unserved, changed = fill(engine)
    assert len(findings) == 60 and changed == 60
    with session_scope(engine, write=False) as s:
        cells = {c.id: c for c in list_cells(s)}
    for c in cells.values():
        if c.stage in ("blocked", "rejected"):
            assert c.blocker_kind in ("feasibility", "implementation"), c.id
            assert c.failing_layer and c.reason and c.next_experiment and c.blocker_evidence, c.id
        else:
            assert c.evidence or c.next_experiment, c.id
    big = cells["galaxy-s25/qwen3.8-27b"]  # the profile's capacity refusal is a rejected cell
    assert (big.stage, big.functional, big.blocker_kind, big.failing_layer) == (
        "rejected",
        "REJECTED",
        "feasibility",
        "memory",
    )
    assert big.blocker_evidence["code"] == "budget_exceeds_device" and "GiB" in big.reason
    tts = cells["galaxy-s25/qwen3-tts-0.6b"]  # no real runtime built for it: the lab's to build
    assert (tts.stage, tts.blocker_kind, tts.failing_layer) == ("blocked", "implementation", "runtime")
    assert "reference imitation" in tts.reason and tts.blocker_evidence["device"] == "s25"
    text = cells["galaxy-s25/spark-x2.5"]  # no llama.cpp build registered here: what to build, said
    assert text.stage == "blocked" and "edgelab runtime build llama.cpp" in text.next_experiment
    # nothing new since: a second fill changes nothing
    assert fill(engine)[2] == 0
    why = {u.device: u.why for u in unserved}
    for jetson in ("orin-agx", "orin-nano", "thor"):  # no study row, said why
        assert "none of the study's 12 rows" in why[jetson], why
    assert all("never probed" in w for d, w in why.items() if d not in ("orin-agx", "orin-nano", "thor"))

    shown = runner.invoke(app, ["--db", url, "matrix"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    assert "REJECTED" in shown.stdout and "memory feas." in shown.stdout and "runtime impl." in shown.stdout
    assert "no row: orin-agx" in shown.stdout
    nxt = runner.invoke(app, ["--db", url, "matrix", "next", "--json"])
    data = json.loads(nxt.stdout)
    assert len(data["cells"]) == 60 and all(c["next_step"] for c in data["cells"])


def test_a_decision_by_hand_is_kept(whole_lab):
    _url, engine = whole_lab
    with session_scope(engine) as s:
        set_cell(
            s,
            "galaxy-s24/spark-x2.5",
            status="BLOCKED",
            reason="Hexagon driver crash",
            layer="device",
            next_experiment="retry on firmware 7",
            kind="feasibility",
        )
    fill(engine)
    with session_scope(engine, write=False) as s:
        c = s.get(MatrixCell, "galaxy-s24/spark-x2.5")
        assert (c.reason, c.next_experiment, c.blocker_kind) == (
            "Hexagon driver crash",
            "retry on firmware 7",
            "feasibility",
        )
    findings, _unserved = assess(engine)  # `matrix next` still says what the lab sees there
    assert next(f for f in findings if f.cell == "galaxy-s24/spark-x2.5").device == "s24"
