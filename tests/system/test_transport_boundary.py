"""The layers above ``edgelab/transport/`` never know how a device is reached.

Walks the source of every module outside the transport package: none imports paramiko or
adbutils, reaches a paramiko object (``paramiko_transport``), compares an endpoint's or device's
kind with a transport name (``.kind == "ssh"``, ``transport in ("adb", ...)``), or probes a
transport for an optional method (``hasattr(t, "run_ps")``): such code asks
``t.supports(Capability.X)`` and builds options with ``options_for`` instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

import edgelab

ROOT = Path(edgelab.__file__).resolve().parent
KINDS = {"ssh", "adb", "local"}
LIBRARIES = {"paramiko", "adbutils"}
OPTIONAL_METHODS = {"run_ps", "stream_ps", "run_line", "sftp", "forward", "interactive", "paramiko_transport"}
KIND_NAMES = {"kind", "transport"}

# Modules that may name a transport kind, each with its reason. Keep this list short.
ALLOWED_KIND = {
    # the device record validates its own columns: which reach fields each transport requires
    "store/devices.py",
    # the add-device form shows the route fields (jump host, adb server) of the transport picked
    "tui/widgets/route_fields.py",
}
ALLOWED_PACKAGES = (
    # the virtual lab is the other side of the transports: it runs sshd and the ADB emulator
    "sim/",
)
# Modules still to be moved behind the transports (none: the ADB sync client and the SFTP resume of
# artifacts/upload.py now live in transport/adb/push.py and transport/ssh/paramiko/sftp.py).
PENDING: set[str] = set()


def _strings(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    return set()


def _names_kind(node: ast.AST) -> bool:
    if isinstance(node, ast.Attribute):
        return node.attr in KIND_NAMES
    if isinstance(node, ast.Name):
        return node.id in KIND_NAMES
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value in KIND_NAMES
    return False


def violations(source: str) -> list[str]:
    """Each line of ``source`` that knows how a device is reached, as ``lineno: what``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [
                f"{node.lineno}: import {a.name}" for a in node.names if a.name.split(".")[0] in LIBRARIES
            ]
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in LIBRARIES:
            found.append(f"{node.lineno}: from {node.module} import")
        elif isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_names_kind(s) for s in sides) and any(_strings(s) & KINDS for s in sides):
                found.append(f"{node.lineno}: kind branch {ast.unparse(node)}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("hasattr", "getattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in OPTIONAL_METHODS
        ):
            found.append(f"{node.lineno}: capability probe {ast.unparse(node)}")
        elif isinstance(node, ast.Attribute) and node.attr == "paramiko_transport":
            found.append(f"{node.lineno}: paramiko object .paramiko_transport")
    return found


def test_the_checker_sees_each_pattern() -> None:
    """The walk must catch what it is for, or the real test below could never fail."""
    bad = "\n".join(
        [
            "import paramiko",
            "from adbutils import adb",
            "if t.kind == 'ssh': pass",
            "if endpoint.kind in ('adb', 'local'): pass",
            "if d.transport != 'adb': pass",
            "if row['transport'] == 'ssh': pass",
            "f = getattr(t, 'run_ps', None)",
            "ok = hasattr(t, 'run_line')",
            "c = t.paramiko_transport",
        ]
    )
    assert [v.split(":")[0] for v in violations(bad)] == [str(i) for i in range(1, 10)]
    fine = "\n".join(
        [
            "if acc.kind == 'gpu': pass",
            "if t.supports(Capability.WINDOWS_SHELL): pass",
            "if shell is Shell.TOYBOX: pass",
            "name = getattr(t, 'name', 'device')",
            "# paramiko, adbutils and t.kind == 'ssh' in a comment",
        ]
    )
    assert violations(fine) == []


def test_no_module_outside_transport_knows_how_a_device_is_reached() -> None:
    offenders: list[str] = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("transport/") or rel.startswith(ALLOWED_PACKAGES) or rel in PENDING:
            continue
        for v in violations(path.read_text(encoding="utf-8")):
            if rel in ALLOWED_KIND and "kind branch" in v:
                continue
            offenders.append(f"edgelab/{rel}:{v}")
    assert offenders == [], "\n".join(
        [
            "these modules know how a device is reached; use the transport's capabilities and options:",
            *offenders,
        ]
    )


def test_the_allowlists_are_still_needed() -> None:
    """An allowance nobody needs any more is removed, so the list only ever shrinks."""
    for rel in sorted(ALLOWED_KIND | PENDING):
        path = ROOT / rel
        if path.exists():
            assert violations(path.read_text(encoding="utf-8")), (
                f"edgelab/{rel} is clean: drop it from the list"
            )
