"""The domain layer never imports the UI (textual, typer, edgelab.cli, edgelab.tui).

Checked twice: statically by import-linter's contract in pyproject.toml, and at
run time by importing every domain module in a fresh interpreter.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_PROBE = r"""
import importlib, pkgutil, sys
import edgelab
ui = ("edgelab.cli", "edgelab.tui")
names = []
def walk(pkg):
    for mod in pkgutil.iter_modules(pkg.__path__, pkg.__name__ + "."):
        if mod.name.startswith(ui) or mod.name.endswith("__main__") or ".migrations" in mod.name:
            continue
        names.append(mod.name)
        m = importlib.import_module(mod.name)
        if mod.ispkg:
            walk(m)
walk(edgelab)
leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("textual", "typer") or m.startswith(ui))
print(len(names))
print(",".join(leaked))
"""


def test_domain_modules_import_without_ui() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert out.returncode == 0, out.stderr
    count, leaked = out.stdout.split("\n")[:2]
    assert int(count) > 5, "the walk found too few domain modules to mean anything"
    assert leaked == "", f"domain import pulled in UI modules: {leaked}"


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
