"""The test lanes of tests/conftest.py: the unit lane selects no test that starts a lab process.

Collected in a real pytest process over files whose tests reach the lab in each of the ways the
marks are derived from: a lab fixture through others (ssh_transport), a fixture param that
requests one at run time (the contract's kinds, db_url's postgresql), a throwaway sshd started by a
module fixture (TmpSshd), and the llama.cpp build."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).parents[1]
FILES = [
    "transport/test_ssh_hostkeys.py",
    "transport/test_transport_contract.py",
    "inventory/test_inventory_trust.py",
    "store/test_store_db.py",
    "adapters/test_llama_build.py",
]
UNIT = "not ssh and not adb and not slow and not postgres"


def test_unit_lane_selects_only_tests_without_lab_processes():
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "--co",
            "-q",
            "-m",
            UNIT,
            *[str(TESTS / f) for f in FILES],
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=TESTS.parent,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    ids = {ln.strip() for ln in out.stdout.splitlines() if "::" in ln}
    # no sshd: stays a unit test
    assert "tests/transport/test_ssh_hostkeys.py::test_closed_port_is_offline" in ids
    assert "tests/transport/test_transport_contract.py::test_put_empty_file[local]" in ids
    assert "tests/store/test_store_db.py::test_in_memory_sqlite_works" in ids
    assert any(i.endswith("[sqlite]") for i in ids)
    lab = [
        i
        for i in ids
        if i.startswith(("tests/inventory/test_inventory_trust.py", "tests/adapters/test_llama_build.py"))
        or any(f"[{p}]" in i for p in ("ssh", "adb", "win_ps", "win_cmd", "postgresql"))
        or "test_fingerprint_matches_openssh" in i
    ]
    assert lab == []
