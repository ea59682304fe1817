"""Compare, A/B, sweeps and relative gates on the virtual lab's real processes (the reference TTS on
orin-agx over the real sshd): an interleaved A/B with a planted slowdown is two linked runs judged
slower, an A/A is no difference, a sweep stores one run per point and names the best, `runs
compare` / `runs baseline` work on them, and a playbook's relative gate fails on the planted
regression with a JUnit failure that names the baseline's run and the interval."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

import pytest
from typer.testing import CliRunner

from edgelab.bench import BenchRequest
from edgelab.bench.sweep import Point, parse_sweep, run_points, schedule
from edgelab.cli import app
from edgelab.deploy.options import Options
from edgelab.inventory.probe import probe_devices
from edgelab.playbook import loads_playbook, run_playbook, to_junit
from edgelab.sim.lab import LabStatus, register
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine, session_scope
from edgelab.store.runs import get_run, list_runs, requests_of

runner = CliRunner()
pytestmark = [pytest.mark.ssh]
FAST = {"frames": 6, "warmup": 1}  # 6 codec frames a request: about 0.3 s at the default pace


@pytest.fixture(scope="module")
def lab(tmp_path_factory, ssh_lab):
    url = f"sqlite:///{tmp_path_factory.mktemp('compare') / 'lab.db'}"
    register(url, LabStatus(ssh_lab.state_dir, ssh=ssh_lab, adb=None), check=False)
    engine = get_engine(url)
    outcomes = probe_devices(engine, ["orin-agx"], timeout=60, ssh_config=str(ssh_lab.ssh_config_path))
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    opts = Options(transport={"ssh_config": str(ssh_lab.ssh_config_path), "timeout": 30})
    env = dict(os.environ) | {"EDGELAB_DB": url, "EDGELAB_SIM_DIR": str(ssh_lab.state_dir)}
    yield url, engine, opts, env
    dbmod.dispose_engines()


def _base(requests: int = 6, **kw) -> BenchRequest:
    return BenchRequest("orin-agx", "qwen3-tts", runtime="reference", requests=requests, frames=6, **kw)


def test_schedule_is_abba_or_back_to_back():
    assert schedule(2, 3, "interleaved") == [(0, 0), (0, 1), (1, 1), (1, 0), (2, 0), (2, 1)]
    assert schedule(2, 2, "back-to-back") == [(0, 0), (1, 0), (0, 1), (1, 1)]
    pts = parse_sweep(["threads=1,2", "chunk_schedule=1+25,2+4+8"])
    assert [p.config for p in pts][-1] == {"threads": "2", "schedule": "2,4,8"} and len(pts) == 4


def test_interleaved_ab_with_a_planted_slowdown_is_two_linked_runs_judged_slower(lab):
    _url, engine, opts, _env = lab
    res = run_points(
        engine,
        _base(),
        [Point("A", {}), Point("B", {"frames_per_s": "20"})],  # the talker 20 % slower: TTFA +25 %
        kind="ab",
        block=3,
        opts=opts,
        tags=["ab-test"],
    )
    a, b = res.points
    assert res.rounds == 2 and a.state == b.state == "finished" and len(a.blocks) == len(b.blocks) == 2
    with session_scope(engine, write=False) as s:
        ra, rb = get_run(s, a.run_id), get_run(s, b.run_id)
        assert ra.meta["sweep"]["points"] == rb.meta["sweep"]["points"]  # linked both ways
        assert [p["run"] for p in ra.meta["sweep"]["points"]] == [a.run_id, b.run_id]
        assert ra.meta["requests"] == 6 and ra.meta["warmup"] == 2 and ra.meta["tags"] == ["ab-test"]
        names = [q.request for q in requests_of(s, rb.id)]
        assert len(names) == 8 and names[0].startswith("b0.") and names[-1].startswith("b1.")
        assert not [r for r in list_runs(s, limit=100) if r.id in a.blocks + b.blocks]  # blocks moved, gone
        assert ra.provenance["runtime_sha256"] and rb.virtual
    by = {m["metric"]: m for m in res.comparison["metrics"]}
    # the paced figures carry the 20 %: RTF and playback start (TTFA over 6 requests is noisier)
    assert by["rtf_streamed"]["verdict"] == "slower" and by["rtf_streamed"]["interval"][0] > 1.1
    assert by["playback_start"]["verdict"] == "slower"
    assert res.best["rtf_streamed"] == "A"


def test_sweep_cli_stores_one_run_per_point_and_compare_and_baseline_cli_read_them(lab, tmp_path):
    url, engine, _opts, env = lab
    res = runner.invoke(
        app,
        ["--db", url, "bench", "qwen3-tts", "--device", "orin-agx", "--runtime", "reference", "--frames", "6",
         "--requests", "6", "--block", "3", "--sweep", "frames_per_s=25,18", "--json"],
        env=env,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert [p["label"] for p in out["points"]] == ["frames_per_s=25", "frames_per_s=18"]
    assert out["best"]["rtf_streamed"] == "frames_per_s=25" and out["virtual"] is True
    fast, slow = (p["run"] for p in out["points"])
    res = runner.invoke(
        app,
        ["--db", url, "profile", "orin-agx", "--pipeline", "qwen3-tts", "--from-sweep", slow, "--metric",
         "rtf_streamed", "--json"],
        env=env,
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    prof = json.loads(res.stdout)["profile"]
    assert prof["from_sweep"] == {
        "sweep": out["sweep"],
        "run": fast,
        "point": "frames_per_s=25",
        "metric": "rtf_streamed",
    }
    assert prof["rules"][-1]["name"] == "from_sweep" and "VIRTUAL" in prof["rules"][-1]["why"]
    res = runner.invoke(app, ["--db", url, "runs", "baseline", "set", "nightly", fast, "--json"], env=env)
    assert res.exit_code == 0, res.output
    plot = tmp_path / "cmp.svg"
    res = runner.invoke(
        app,
        ["--db", url, "runs", "compare", "baseline:nightly", slow, "--json", "--plot", str(plot)],
        env=env,
    )
    assert res.exit_code == 0, res.output
    cmp = json.loads(res.stdout)
    assert cmp["a"]["runs"] == [fast] and cmp["comparable"] and cmp["confidence"] == 0.99
    assert {m["metric"]: m["verdict"] for m in cmp["metrics"]}["rtf_streamed"] == "slower"
    assert plot.read_text().lstrip().startswith("<?xml") and "TTFA" in plot.read_text()
    res = runner.invoke(app, ["--db", url, "runs", "compare", fast, slow], env=env)  # the table
    assert res.exit_code == 0 and "slower" in res.stdout and "B/A" in res.stdout
    res = runner.invoke(
        app, ["--db", url, "runs", "compare", fast, slow, "--device", "x", "-m", "ttfa"], env=env
    )
    assert res.exit_code == 0  # --device narrows sets by name only; two run ids ignore it
    res = runner.invoke(app, ["--db", url, "runs", "baseline", "ls", "--json"], env=env)
    assert [b["runs"] for b in json.loads(res.stdout)] == [[fast]]
    res = runner.invoke(app, ["--db", url, "runs", "rm", fast], env=env)
    assert res.exit_code != 0 and "baseline nightly" in res.output


PLAY = """
name: nightly-tts
devices: [orin-agx]
vars: {fps: 25}
steps:
  - bench: {workload: tts, requests: 6, warmup: 1, frames: 6, frames_per_s: "${fps}"}
  - gate:
      baseline: nightly-play
      checks: ["ttfa.p50 <= baseline * 1.05", "slower == false", "rtf_total.p95 < 2"]
"""


def test_playbook_relative_gate_fails_on_a_planted_regression_naming_the_baseline(lab):
    _url, engine, _opts, _env = lab
    pb = loads_playbook(PLAY)
    first = run_playbook(engine, pb)  # no baseline yet: the relative checks are not judged, said so
    gate = first.jobs[0].steps[1]
    assert first.ok and "not judged: no baseline nightly-play" in gate.message
    assert gate.details["not_judged"] == ["ttfa.p50 <= baseline * 1.05", "slower == false"]
    good = run_playbook(engine, pb, update_baseline=True)
    assert good.ok and good.jobs[0].baselines
    base_run = good.jobs[0].steps[0].run_id
    bad = run_playbook(engine, pb, variables={"fps": 18})  # the planted regression: a slower talker
    assert not bad.ok
    step = bad.jobs[0].steps[1]
    assert step.status == "failed" and step.category == "test"
    xml = ET.fromstring(to_junit(bad))
    failure = xml.find(".//failure")
    assert failure is not None and failure.get("type") == "test"
    msg = failure.get("message") or ""
    assert f"baseline nightly-play (run {base_run})" in msg and "median ratio" in msg and "slower" in msg
    assert "[" in msg.split("median ratio", 1)[1]  # the interval
    props = {p.get("name"): p.get("value") for p in xml.iter("property")}
    assert props["baseline:nightly-play"] == base_run


def test_a_refused_configuration_stops_the_pass_and_keeps_what_was_measured(lab):
    from edgelab.errors import EdgelabError

    _url, engine, opts, _env = lab
    with session_scope(engine, write=False) as s:
        before = {r.id for r in list_runs(s, limit=500)}
    with pytest.raises(EdgelabError):
        run_points(engine, _base(requests=3), [Point("A", {}), Point("B", {"strategy": "S2"})], kind="ab",
                   block=3, opts=opts)  # fmt: skip
    with session_scope(engine, write=False) as s:
        new = [r for r in list_runs(s, limit=500) if r.id not in before and (r.meta or {}).get("sweep")]
        by = {r.meta["sweep"]["label"]: r for r in new}
        assert by["A"].state == "stopped" and "the pass stopped" in (by["A"].error or "")
        assert len(requests_of(s, by["A"].id)) == 4  # its block (1 warm-up + 3) is kept in it
        assert by["B"].state == "stopped"
