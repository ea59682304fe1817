"""The domain layer never imports the UI (textual, typer, edgelab.cli, edgelab.tui).

Checked twice: statically by import-linter's contract in pyproject.toml, and at
run time by importing every domain module in a fresh interpreter; a leak is traced to the
module that imports the UI (each suspect alone in its own interpreter), so the failure names it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_PROBE = r"""
import importlib, pkgutil, sys
import edgelab
ui = ("edgelab.cli", "edgelab.tui")
def leaked():
    return {m for m in sys.modules if m.split(".")[0] in ("textual", "typer") or m.startswith(ui)}
def ours():
    return {m for m in sys.modules if m.startswith("edgelab.")}
names, culprits = [], []
def walk(pkg):
    for mod in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + "."):
        if mod.name.startswith(ui) or mod.name.endswith("__main__") or ".migrations" in mod.name:
            continue
        names.append(mod.name)
        before, loaded = leaked(), ours()
        m = importlib.import_module(mod.name)
        if leaked() - before:  # this import brought UI modules in: the suspects are what it loaded
            culprits.append(",".join(sorted(ours() - loaded) or [mod.name]))
        if mod.ispkg:
            walk(m)
walk(edgelab)
print(len(names))
print(";".join(culprits))
"""

# One suspect in a fresh interpreter: how many edgelab modules its import loads, and whether UI came in.
_ALONE = r"""
import importlib, sys
importlib.import_module(sys.argv[1])
ui = [m for m in sys.modules if m.split(".")[0] in ("textual", "typer") or m.startswith(("edgelab.cli", "edgelab.tui"))]
print(len([m for m in sys.modules if m.startswith("edgelab.")]), ",".join(sorted(ui)[:5]))
"""


def _importer(suspects: list[str]) -> str:
    """The suspect that pulls the UI in with the fewest edgelab modules loaded: the one that imports it."""
    found = []
    for name in suspects:
        out = subprocess.run(
            [sys.executable, "-c", _ALONE, name], capture_output=True, text=True, cwd=ROOT, timeout=60
        )
        n, _, ui = out.stdout.strip().partition(" ")
        if ui:
            found.append((int(n), name, ui))
    return min(found)[1] + " -> " + min(found)[2] if found else ",".join(suspects)


def test_domain_modules_import_without_ui() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr
    count, culprits = out.stdout.split("\n")[:2]
    assert int(count) > 5, "the walk found too few domain modules to mean anything"
    named = [_importer(c.split(",")) for c in culprits.split(";") if c]
    assert not named, f"domain import pulled in UI modules (importer -> what came in): {named}"


def test_import_linter_contract_holds() -> None:
    import logging

    from importlinter.cli import lint_imports

    # import-linter configures logging with dictConfig, which disables every logger that exists
    # (paramiko.transport, once a test of this worker made an SSH connection): give them back
    loggers = [lg for lg in logging.root.manager.loggerDict.values() if isinstance(lg, logging.Logger)]
    disabled = {lg: lg.disabled for lg in loggers}
    try:
        assert lint_imports(config_filename=str(ROOT / "pyproject.toml")) == 0
    finally:
        for lg, was in disabled.items():
            lg.disabled = was
