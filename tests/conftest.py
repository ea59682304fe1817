"""Shared test fixtures. Virtual devices are real server processes (sshd, the adb server)."""

pytest_plugins = [
    "fixtures.ssh_lab",
    "fixtures.adb_lab",
]
