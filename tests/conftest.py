"""Shared test fixtures. Virtual devices are real server processes (sshd, the adb server)."""

import os

import pytest

# Tests pass fresh ``--db`` paths everywhere; the CLI creates them as scripts do (the refusal of a
# missing --db path without --create is tested with this unset).
os.environ.setdefault("EDGELAB_DB_CREATE", "1")

from edgelab.store import db as dbmod
from edgelab.transport.local import LocalTransport

pytest_plugins = [
    "fixtures.ssh_lab",
    "fixtures.adb_lab",
    "fixtures.faults",
    "fixtures.llama_build",
    "fixtures.postgres",
]


@pytest.fixture(autouse=True)
def _output_width(monkeypatch):
    """Tests read whole lines: the width of the terminal that started pytest (COLUMNS=40, say) is not
    theirs. A test that checks narrow output sets COLUMNS itself."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture(scope="session")
def local_transport() -> LocalTransport:
    return LocalTransport("lab-host")


@pytest.fixture
def dbpath(tmp_path, monkeypatch):
    """A fresh SQLite path for one test, with edgelab's home and engine cache isolated."""
    monkeypatch.setenv("EDGELAB_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("EDGELAB_DB", raising=False)
    dbmod.dispose_engines()
    yield tmp_path / "lab.db"
    dbmod.dispose_engines()
