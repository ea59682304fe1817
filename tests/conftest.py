"""Shared test fixtures. Virtual devices are real server processes (sshd, the adb server)."""

import pytest

from edgelab.transport.local import LocalTransport

pytest_plugins = [
    "fixtures.ssh_lab",
    "fixtures.adb_lab",
]


@pytest.fixture(scope="session")
def local_transport() -> LocalTransport:
    return LocalTransport("lab-host")
