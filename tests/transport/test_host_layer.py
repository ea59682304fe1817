"""The device's OS is decided once, in ``edgelab/transport/host.py``: the host behind a connection.

Checked two ways: no module outside ``edgelab/transport/`` branches on a shell (``is Shell.X``,
``== Shell.X``), and the POSIX host runs a real detached process on the lab host (a local
transport) through launch, poll, read-range, memory and stop, as deploy and bench use it.
"""

from __future__ import annotations

import ast
import time
from pathlib import Path

import edgelab
from edgelab.probe.collectors import COLLECTORS
from edgelab.transport.host import (
    AndroidHost,
    Host,
    Link,
    WindowsHost,
    host_class,
    host_for_family,
    host_named,
    host_of,
)
from edgelab.transport.local import LocalTransport
from edgelab.transport.quoting import Shell

ROOT = Path(edgelab.__file__).resolve().parent


def _shell_branches(source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                if (
                    isinstance(side, ast.Attribute)
                    and isinstance(side.value, ast.Name)
                    and side.value.id == "Shell"
                ):
                    found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_outside_the_transports_branches_on_a_shell() -> None:
    bad = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("transport/"):
            continue
        hits = _shell_branches(path.read_text())
        if hits:
            bad[rel] = hits
    assert bad == {}, f"ask the host (edgelab.transport.host.host_of) instead: {bad}"


def _shell_names(source: str) -> list[str]:
    return [
        f"{node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Shell"
    ]


def test_no_module_outside_the_transports_names_a_shell() -> None:
    """Not even to declare one (a collector's script dialect is its family, which the host maps)."""
    bad = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if not rel.startswith("transport/") and (hits := _shell_names(path.read_text())):
            bad[rel] = hits
    assert bad == {}, f"name the OS family and ask the host layer (edgelab.transport.host): {bad}"


def test_a_collector_family_is_the_host_family_of_its_shell() -> None:
    for shell in (Shell.POSIX, Shell.TOYBOX, Shell.POWERSHELL):
        assert host_for_family(host_class(shell).family) is host_class(shell)
    assert {name: host_for_family(c.family).family for name, c in COLLECTORS.items()} == {
        "linux": "linux",
        "android": "android",
        "windows": "windows",
    }
    assert COLLECTORS["windows"].argv("n")[:2] != ["sh", "-c"]
    assert COLLECTORS["linux"].argv("n")[:2] == ["sh", "-c"]


def test_the_branch_finder_sees_a_branch() -> None:
    assert _shell_branches("if t.shell is Shell.POWERSHELL:\n    pass\n")
    assert not _shell_branches("x = join(argv, Shell.POSIX)\n")
    assert _shell_names("x = join(argv, Shell.POSIX)\n")


def test_one_host_per_shell_family_and_per_connection() -> None:
    assert host_class(Shell.POSIX) is Host and host_class(Shell.TOYBOX) is AndroidHost
    assert host_class(Shell.POWERSHELL) is WindowsHost
    assert [host_class(s).family for s in (Shell.POSIX, Shell.TOYBOX, Shell.POWERSHELL)] == [
        "linux",
        "android",
        "windows",
    ]
    t = LocalTransport()
    assert host_of(t) is host_of(t)  # chosen once: kept in the connection's memo
    assert host_of(LocalTransport()) is not host_of(t)


def test_roots_and_paths_per_os() -> None:
    assert AndroidHost(LocalTransport()).run_root() == "/data/local/tmp/edgelab/runs"
    assert AndroidHost(LocalTransport()).store_root() == "/data/local/tmp/edgelab/store"
    win = WindowsHost(LocalTransport())
    win._home = "C:\\Users\\lab"
    assert win.run_root() == "C:\\Users\\lab\\.edgelab\\runs"
    assert win.join("C:\\runs\\r1\\", "stdout.log") == "C:\\runs\\r1\\stdout.log"
    assert WindowsHost.transfer_path("C:\\a\\b") == "/C:/a/b"
    assert WindowsHost.script_argv("Get-Date")[:2] != ["sh", "-c"]


def test_the_run_root_a_plan_writes_is_the_one_the_device_gives_once_asked() -> None:
    """A plan is made before any connection: its run root is the host's own, written unexpanded."""
    assert host_named("toybox").planned_run_root == AndroidHost(LocalTransport()).run_root()
    posix = Host(LocalTransport())
    assert host_named("posix").planned_run_root.replace("~", posix.home(), 1) == posix.run_root()
    win = WindowsHost(LocalTransport())
    win._home = "C:\\Users\\lab"
    assert host_named("powershell").planned_run_root.replace("%USERPROFILE%", win._home) == win.run_root()
    assert host_named("no-such-shell") is Host
    assert [host_named(s).secret_env for s in ("posix", "toybox", "powershell")] == [True, True, False]


def _registered_shell_compares(source: str) -> list[str]:
    """``device.shell == "toybox"``: a branch on the inventory's shell name, not through the host."""
    names = {"posix", "toybox", "powershell", "cmd"}
    return [
        f"{node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Compare)
        and any(isinstance(s, ast.Constant) and s.value in names for s in [node.left, *node.comparators])
    ]


def test_no_module_outside_the_transports_branches_on_a_registered_shell_name() -> None:
    """The virtual devices (``sim/``) are the devices' side, each persona its own OS: left out."""
    bad = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if not rel.startswith(("transport/", "sim/")) and (
            hits := _registered_shell_compares(path.read_text())
        ):
            bad[rel] = hits
    assert bad == {}, f"ask the host kind (edgelab.transport.host.host_named) instead: {bad}"


def test_posix_host_runs_a_detached_process_and_stops_it(tmp_path: Path) -> None:
    with LocalTransport() as t:
        host = host_of(t)
        assert host.run_root() == str(Path.home()).rstrip("/") + "/.edgelab/runs"
        blob = tmp_path / "blob-sh"
        blob.write_text("#!/bin/sh\necho ready; exec sleep 60\n")
        host.layout(str(tmp_path / "bin"), [Link("prog", str(blob), program=True)])
        assert (tmp_path / "bin" / "prog").resolve() == blob.resolve()
        wd = str(tmp_path / "run" / "p")
        pid = host.launch(wd, [str(tmp_path / "bin" / "prog")], {"EDGELAB_X": "1"})
        assert host.pid_from_file(wd) == pid
        deadline = time.monotonic() + 30
        got = host.poll(wd, pid, 0)
        while "ready" not in got.text and time.monotonic() < deadline:
            time.sleep(0.1)
            got = host.poll(wd, pid, 0)
        assert got.alive and got.text.startswith("ready") and got.exit_code is None
        assert host.read_range(f"{wd}/stdout.log", 2, 3) == "ady"
        assert host.read_tail(f"{wd}/stdout.log", 3) == "dy\n"
        rss, peak = host.memory(pid)
        assert rss and peak and rss > 0
        assert host.stop(pid, 2) == 0
        assert not host.alive(pid)
        assert host.read_tail(f"{wd}/nothing.log") == ""


def test_available_memory_is_asked_of_each_os(ssh_transport, win_ps_transport, adb_transport) -> None:
    """A playbook's soak samples it on any device: /proc/meminfo on Linux and Android, CIM on Windows."""
    got = {
        t.name: host_of(t).mem_available(timeout=30) for t in (ssh_transport, win_ps_transport, adb_transport)
    }
    assert all(isinstance(v, int) and v > 0 for v in got.values()), got
