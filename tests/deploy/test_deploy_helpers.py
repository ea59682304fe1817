"""Shared fixtures for the deploy tests: the virtual lab in a fresh database, probed once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from edgelab.deploy.options import Options
from edgelab.inventory.probe import probe_devices
from edgelab.sim.lab import LabStatus, register
from edgelab.store import db as dbmod
from edgelab.store.db import get_engine

DEPLOY_DEVICES = ["orin-agx", "s25", "rb3g2"]


def alive_on_host(pid: int) -> bool:
    """Whether ``pid`` is a live (non-zombie) process in the lab host's process table."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    state = next((line.split()[1] for line in status.splitlines() if line.startswith("State:")), "?")
    return state != "Z"


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group on the lab host."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()
        if fields[2] == str(pgid) and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def probed_lab(tmp_path_factory, ssh_lab, adb_lab, devices: list[str], name: str):
    """(db url, engine): the whole lab registered in a fresh database, ``devices`` probed."""
    url = f"sqlite:///{tmp_path_factory.mktemp(name) / 'lab.db'}"
    register(url, LabStatus(ssh_lab.state_dir, ssh=ssh_lab, adb=adb_lab), check=False)
    engine = get_engine(url)
    outcomes = probe_devices(engine, devices, timeout=60, ssh_config=str(ssh_lab.ssh_config_path))
    assert all(o.ok for o in outcomes), [o.error for o in outcomes]
    return url, engine


@pytest.fixture(scope="module")
def deploy_lab(tmp_path_factory, ssh_lab, adb_lab):
    """(db url, engine, Options) with the lab registered and DEPLOY_DEVICES probed."""
    url, engine = probed_lab(tmp_path_factory, ssh_lab, adb_lab, DEPLOY_DEVICES, "deploy")
    opts = Options(transport={"ssh_config": str(ssh_lab.ssh_config_path), "timeout": 30})
    yield url, engine, opts
    dbmod.dispose_engines()


ALL_DEVICES = [
    "orin-agx",
    "orin-nano",
    "thor",
    "wsl-hx370",
    "win-hx370-rtx5090",
    "xelite-pc",
    "s25",
    "s24",
    "rb3g2",
    "sa8775p",
]


@pytest.fixture(scope="module")
def whole_lab(tmp_path_factory, ssh_lab, adb_lab):
    """(db url, engine) with every virtual device registered and probed, nothing built or registered."""
    yield probed_lab(tmp_path_factory, ssh_lab, adb_lab, ALL_DEVICES, "whole")
    dbmod.dispose_engines()


def cli_env(url: str, ssh_lab) -> dict[str, str]:
    env = dict(os.environ)
    env["EDGELAB_DB"] = url
    env["EDGELAB_SIM_DIR"] = str(ssh_lab.state_dir)
    return env
