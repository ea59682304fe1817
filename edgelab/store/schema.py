"""The schema head this edgelab ships, read from the migration files without importing Alembic.

Importing Alembic costs more CPU than most commands; a database already at head needs
none of it. The scan reads each version file's ``revision`` / ``down_revision`` lines;
anything it cannot read makes it answer ``None``, and callers fall back to Alembic.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

VERSIONS_DIR = Path(__file__).with_name("migrations") / "versions"
_ASSIGN = re.compile(r"^(revision|down_revision)\s*(?::[^=]+)?=\s*(.+?)\s*$", re.M)


@cache
def scanned_head() -> str | None:
    """The single head revision of the shipped migrations, or ``None`` when the files do not say it plainly."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in sorted(VERSIONS_DIR.glob("*.py")):
        if path.name == "__init__.py":
            continue
        found = {m[1]: m[2] for m in _ASSIGN.finditer(path.read_text(encoding="utf-8"))}
        try:
            rev = ast.literal_eval(found["revision"])
            down = ast.literal_eval(found.get("down_revision", "None"))
        except (KeyError, ValueError, SyntaxError):
            return None
        if not isinstance(rev, str):
            return None
        revisions.add(rev)
        for parent in down if isinstance(down, tuple | list) else (down,):
            if parent is not None:
                parents.add(parent)
    heads = revisions - parents
    return next(iter(heads)) if len(heads) == 1 else None
