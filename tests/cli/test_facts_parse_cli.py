"""`edgelab facts parse` end to end: the real CLI over the corpus captures recovers EXPECTED.yaml facts."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from probe.test_probe_parsers import fact_matches  # tests/ is on sys.path (conftest.py)
from typer.testing import CliRunner

from edgelab.cli import app

CORPUS = Path(__file__).parents[1] / "corpus"
EXPECTED: dict = yaml.safe_load((CORPUS / "EXPECTED.yaml").read_text(encoding="utf-8"))
runner = CliRunner()


def test_json_over_whole_corpus_recovers_expected(capsys):
    files = sorted(EXPECTED)
    result = runner.invoke(app, ["facts", "parse", "--json", *[str(CORPUS / f) for f in files]])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [Path(o["file"]).relative_to(CORPUS).as_posix() for o in out] == files
    total = hit = 0
    misses = []
    for o in out:
        rel = Path(o["file"]).relative_to(CORPUS).as_posix()
        assert set(o) >= {"file", "command", "facts", "warnings"}
        for key, exp in (EXPECTED[rel].get("facts") or {}).items():
            total += 1
            if fact_matches(key, exp, o["facts"]):
                hit += 1
            else:
                misses.append(f"{rel}: {key}")
    with capsys.disabled():
        print(f"\nfacts parse --json recovered {hit}/{total} = {hit / total:.1%}")
    assert total > 300
    assert not misses, misses  # every fact of every file, exactly (the fraction is the report above)


def test_human_output_groups_and_warns():
    f = CORPUS / "jetson/agx-orin-devkit_r39.2.0_jtop-error-log.txt"
    result = runner.invoke(app, ["facts", "parse", str(f)], env={"COLUMNS": "160"})
    assert result.exit_code == 0, result.output
    assert "jtop --error-log" in result.output
    assert "39.2.0" in result.output
    assert "JetPack: unknown for L4T 39.2.0" in result.output
    assert "identity" in result.output and "os" in result.output


def test_unknown_format_exits_1_with_one_line(tmp_path):
    junk = tmp_path / "junk.txt"
    junk.write_text("hello there\nnothing to see\n")
    good = CORPUS / "wsl/wsl2-5.10.16.3_uname-a.txt"
    result = runner.invoke(app, ["facts", "parse", "--json", str(good), str(junk)])
    assert result.exit_code == 1
    assert "unknown format" in result.stderr and "recognized commands" in result.stderr
    assert "uname -a" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    out = json.loads(result.stdout)  # the readable file is still reported
    assert out[0]["facts"]["kernel_release"] == "5.10.16.3-microsoft-standard-WSL2"


def test_missing_file_and_forced_command(tmp_path):
    result = runner.invoke(app, ["facts", "parse", str(tmp_path / "nope.txt")])
    assert result.exit_code == 1 and "cannot read" in result.stderr
    f = tmp_path / "props.txt"
    f.write_text("[ro.board.platform]: [sun]\n")  # one line: too little to detect, fine when forced
    assert runner.invoke(app, ["facts", "parse", str(f)]).exit_code == 1
    result = runner.invoke(app, ["facts", "parse", "--json", "--as", "getprop", str(f)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)[0]["typed"]["identity"]["soc_part"] == "SM8750"
    assert runner.invoke(app, ["facts", "parse", "--as", "bogus", str(f)]).exit_code == 2


def test_crlf_paste_reads_the_same(tmp_path):
    src = CORPUS / "windows/lenovo-83ED-snapdragon-x-elite_systeminfo.txt"
    crlf = tmp_path / "systeminfo.txt"
    crlf.write_bytes(src.read_bytes().replace(b"\n", b"\r\n"))
    a = json.loads(runner.invoke(app, ["facts", "parse", "--json", str(src)]).stdout)[0]
    b = json.loads(runner.invoke(app, ["facts", "parse", "--json", str(crlf)]).stdout)[0]
    assert a["facts"] == b["facts"] and a["facts"]["arch"] == "arm64"


@pytest.mark.skipif(shutil.which("edgelab") is None, reason="edgelab console script not installed")
def test_console_script():
    f = CORPUS / "nvidia-smi/rtx2080super_win11-26200_drv610.62_nvidia-smi.txt"
    proc = subprocess.run(
        ["edgelab", "facts", "parse", "--json", str(f)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)[0]
    assert out["command"] == "nvidia-smi" and out["facts"]["kmd_version"] == "610.62"
