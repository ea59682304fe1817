"""`edgelab probe / facts DEVICE / profile` as an operator runs them, against the virtual lab."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from edgelab.cli import app
from edgelab.sim.lab import LabStatus, register
from edgelab.store import db as dbmod

runner = CliRunner()


@pytest.fixture(scope="module")
def cli_db(tmp_path_factory, ssh_lab, adb_lab):
    url = f"sqlite:///{tmp_path_factory.mktemp('cli-probe') / 'lab.db'}"
    register(url, LabStatus(ssh_lab.state_dir, ssh=ssh_lab, adb=adb_lab), check=False)
    mp = pytest.MonkeyPatch()
    mp.setenv("EDGELAB_DB", url)
    mp.setenv("EDGELAB_SIM_DIR", str(ssh_lab.state_dir))  # the lab's ssh_config, key, known_hosts
    res = runner.invoke(app, ["probe", "orin-agx", "s25", "xelite-pc", "--json", "--parallel", "3"])
    try:
        yield url, res
    finally:
        mp.undo()
        dbmod.dispose_engines()


def test_probe_json_summarises_each_device(cli_db):
    _url, res = cli_db
    assert res.exit_code == 0, res.output
    rows = {r["name"]: r for r in json.loads(res.stdout)}
    assert (
        rows["orin-agx"]["class"] == "jetson" and rows["orin-agx"]["catalog_entry"] == "jetson-agx-orin-64gb"
    )
    assert rows["s25"]["class"] == "npu_phone" and "Adreno 830" in rows["s25"]["summary"]["accelerators"]
    assert rows["xelite-pc"]["summary"]["os"].startswith("Microsoft Windows")
    assert all(r["virtual"] and r["ok"] and r["facts_hash"] for r in rows.values())


def test_probe_table_marks_virtual_and_exit_1_when_one_fails(cli_db):
    res = runner.invoke(app, ["probe", "orin-nano", "s24-locked"])
    assert res.exit_code == 1
    assert "VIRTUAL" in res.stdout and "orin-nano" in res.stdout
    assert "s24-locked" in res.output and "1 of 2 probed" in res.stdout


def test_probe_usage_errors(cli_db):
    assert runner.invoke(app, ["probe"]).exit_code == 2
    res = runner.invoke(app, ["probe", "nope"])
    assert res.exit_code == 1 and "no device named" in res.output


def test_facts_device_grouped_raw_and_json(cli_db):
    res = runner.invoke(app, ["facts", "orin-agx"])
    assert res.exit_code == 0, res.output
    flat = "".join(res.stdout.split())  # the table folds long cells at the runner's 80 columns
    assert "l4t_version" in flat and "cat/etc/nv_tegra_release" in flat
    raw = runner.invoke(app, ["facts", "orin-agx", "--raw"])
    assert "== nv_tegra_release" in raw.stdout and "# R36" in raw.stdout
    data = json.loads(runner.invoke(app, ["facts", "s25", "--json"]).stdout)
    assert data["facts"]["identity"]["soc_part"] == "SM8750" and data["snapshot"]["virtual"] is True
    rawj = json.loads(runner.invoke(app, ["facts", "s25", "--json", "--raw"]).stdout)
    assert "getprop" in rawj["raw"]["sections"]
    never = runner.invoke(app, ["facts", "thor"])  # registered, never probed
    assert never.exit_code == 1 and "edgelab probe thor" in never.output


def test_facts_parse_still_works_next_to_facts_device(cli_db, tmp_path):
    f = tmp_path / "rel.txt"
    f.write_text("# R36 (release), REVISION: 4.4, GCID: 1, BOARD: generic, EABI: aarch64, DATE: x\n")
    res = runner.invoke(app, ["facts", "parse", str(f), "--json"])
    assert res.exit_code == 0, res.output


def test_profile_refuses_s1_on_a_phone_with_the_reason(cli_db):
    res = runner.invoke(app, ["profile", "s25", "--pipeline", "qwen3-tts-0.6b", "--json"])
    assert res.exit_code == 0, res.output
    prof = json.loads(res.stdout)["profile"]
    assert prof["class"] == "npu_phone"
    s1 = next(s for p in prof["pipelines"] for s in p["strategies"] if s["strategy"] == "S1")
    assert s1["eligible"] is False and s1["reason"]
    assert prof["rules"]


def test_profile_explain_lists_rules(cli_db):
    res = runner.invoke(app, ["profile", "orin-agx", "--pipeline", "qwen3-tts-0.6b", "--explain"])
    assert res.exit_code == 0, res.output
    flat = "".join(res.stdout.split())
    assert "rulesthatfired" in flat and "device_class" in flat and "S1" in flat


def test_profile_accepts_a_catalog_alias(cli_db):
    """`qwen3-tts` is an alias in the pipeline catalog: profile reads it as the 0.6B spec."""
    by_alias = runner.invoke(app, ["profile", "s25", "--pipeline", "qwen3-tts", "--json"])
    by_id = runner.invoke(app, ["profile", "s25", "--pipeline", "qwen3-tts-0.6b", "--json"])
    assert by_alias.exit_code == 0 and by_id.exit_code == 0, by_alias.output
    assert json.loads(by_alias.stdout)["profile"] == json.loads(by_id.stdout)["profile"]
    res = runner.invoke(app, ["profile", "s25", "--pipeline", "qwen3-tts", "--explain"])
    assert res.exit_code == 0 and "qwen3-tts-0.6b" in res.stdout, res.output
    bad = runner.invoke(app, ["profile", "s25", "--pipeline", "qwen9"])
    assert (
        bad.exit_code == 2
        and "unknown pipeline 'qwen9'" in bad.stderr
        and "qwen3-tts = qwen3-tts-0.6b" in bad.stderr
    )
